"""Build the broker, operator and Spark images without Docker or a registry, and load them into the node.

Each image is a stack of gzipped tar layers written straight into an OCI layout (no diffing of a rootfs: we
know what each layer holds): a Debian bookworm rootfs from mmdebstrap, the pinned Python dependencies, for
Spark its Kafka connector and entrypoint, and the kafkette wheel on top. Every layer is cached in
``~/.cache/kafkette/images`` under a hash of its inputs, so a rebuild after a code change redoes only the top
layer, and a rebuild with nothing changed does nothing. ``make node`` writes ``e2e/.node/env``; when it exists,
the archives are imported into the node's containerd with ``ctr images import``, skipped when containerd
already holds the same manifest.

Run as root (mmdebstrap and file ownership) from the project's venv: ``make images``.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import distribution
from pathlib import Path
from typing import Any, Protocol

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from kafkette.pipeline import connector

REPO = Path(__file__).resolve().parent.parent
CACHE = connector.cache_root() / "images"
NODE_ENV = REPO / "e2e" / ".node" / "env"
DEBS = CACHE / "debs"
# The machine's own apt sources (bookworm, updates, security), so the images follow the host's mirror. A host
# that is not Debian (the kind workflow's Ubuntu runner) names a bookworm sources file of its own instead.
APT_SOURCES = Path(os.environ.get("KAFKETTE_APT_SOURCES", "/etc/apt/sources.list.d/debian.sources"))
SUITE = "bookworm"
# Debian's interpreter: the same 3.11 as the host, so wheels resolved and byte-compiled here fit.
SITE_PACKAGES = "usr/local/lib/python3.11/dist-packages"
PYTHON = ("python3", "python-is-python3")
# Only the operator imports these (a test proves the broker and pipeline never do): the broker and Spark
# images leave out their dependency closure, about 140 MB unpacked.
OPERATOR_ONLY = frozenset({"kopf", "kubernetes", "jinja2", "pyyaml"})
SPARK_CACHE = "/opt/kafkette/cache"
SPARK_ENTRYPOINT = "/usr/local/bin/kafkette-spark-entrypoint"
SHARED_LIBRARY = re.compile(r"\.so(\.\d+)*$")
LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
# Bumped when the way layers are made changes, so cached layers made the old way are not reused.
RECIPE = "2"


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    home: str


@dataclass(frozen=True)
class Base:
    """A Debian rootfs: essential packages, the listed ones (without recommends) and the image's user."""

    packages: tuple[str, ...]
    user: User


@dataclass(frozen=True)
class Image:
    repository: str
    base: Base
    # Dependency groups, bottom layer first: "core" (what the broker imports), "operator", "spark".
    groups: tuple[str, ...]
    config: Mapping[str, Any]
    spark: bool = False


@dataclass(frozen=True)
class Layer:
    digest: str
    diff_id: str
    size: int
    unpacked: int
    comment: str
    created: str


@dataclass
class Timer:
    started: float = field(default_factory=time.monotonic)

    def __str__(self) -> str:
        return f"{time.monotonic() - self.started:.1f} s"


KAFKETTE = User("kafkette", 1000, "/var/lib/kafkette")
SPARK = User("spark", 185, "/home/spark")
PYTHON_BASE = Base(PYTHON, KAFKETTE)
SPARK_BASE = Base((*PYTHON, "openjdk-17-jre-headless", "procps", "tini"), SPARK)
PYTHON_ENV = ["PATH=/usr/local/bin:/usr/bin:/bin", "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"]


def project_version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def pinned_pyspark() -> str:
    """PySpark's version from the `spark` extra of pyproject.toml, the one place it is written."""
    spark = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["spark"]
    pins = [Requirement(item) for item in spark if Requirement(item).name == "pyspark"]
    return next(iter(pins[0].specifier)).version


def images() -> tuple[Image, ...]:
    """The three images with the configuration their Dockerfiles declare."""
    user = f"{KAFKETTE.uid}:{KAFKETTE.uid}"
    broker = {
        "User": user,
        "Env": PYTHON_ENV,
        "Entrypoint": ["kafkette", "broker"],
        "Cmd": ["--data-dir", "/var/lib/kafkette/data", "--listen", "0.0.0.0:9092"],
        "WorkingDir": KAFKETTE.home,
        "Volumes": {KAFKETTE.home: {}},
        "ExposedPorts": {"9092/tcp": {}, "9093/tcp": {}},
    }
    operator = {
        "User": user,
        "Env": PYTHON_ENV,
        "Entrypoint": ["kopf"],
        "Cmd": [
            "run",
            "--standalone",
            "--all-namespaces",
            "--liveness=http://0.0.0.0:8080/healthz",
            "-m",
            "kafkette.operator.kube.handlers",
        ],
        "ExposedPorts": {"8080/tcp": {}},
    }
    spark_home = f"/{SITE_PACKAGES}/pyspark"
    spark = {
        "User": f"{SPARK.uid}:{SPARK.uid}",
        "Env": [
            *PYTHON_ENV,
            "JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64",
            f"SPARK_HOME={spark_home}",
            "PYSPARK_PYTHON=python3",
            f"KAFKETTE_CACHE={SPARK_CACHE}",
        ],
        "Entrypoint": ["/usr/bin/tini", "--", SPARK_ENTRYPOINT],
        "WorkingDir": SPARK.home,
    }
    return (
        Image("kafkette/broker", PYTHON_BASE, ("core",), broker),
        Image("kafkette/operator", PYTHON_BASE, ("core", "operator"), operator),
        Image("kafkette/spark", SPARK_BASE, ("core", "spark"), spark, spark=True),
    )


# --- inputs ------------------------------------------------------------------------------------------


def digest_of(*parts: str | bytes) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "big") + data)
    return hasher.hexdigest()


def files_under(root: Path) -> Iterator[Path]:
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(name for name in subdirs if name != "__pycache__")
        for name in sorted(names):
            if not name.endswith((".pyc", ".pyo")):
                yield Path(directory) / name


def content_hash(paths: Iterable[Path]) -> str:
    """Hash of the files' names (relative to the repository, or the bare name outside it) and bytes."""
    hasher = hashlib.sha256()
    for path in paths:
        for item in [path] if path.is_file() else files_under(path):
            hasher.update(str(item.relative_to(REPO) if item.is_relative_to(REPO) else item.name).encode() + b"\0")
            hasher.update(hashlib.sha256(item.read_bytes()).digest())
    return hasher.hexdigest()


def closure(extras: tuple[str, ...], skip: frozenset[str]) -> dict[str, str]:
    """kafkette's dependencies as installed in this venv (what the tests ran with), name -> version.

    Top-level requirements named in `skip` are left out with everything only they pull in."""
    pins: dict[str, str] = {}
    pending: list[tuple[str, tuple[str, ...]]] = [("kafkette", extras)]
    while pending:
        name, wanted = pending.pop()
        dist = distribution(name)
        for text in dist.requires or []:
            requirement = Requirement(text)
            key = canonicalize_name(requirement.name)
            applies = requirement.marker is None or any(
                requirement.marker.evaluate({"extra": extra}) for extra in wanted or ("",)
            )
            if not applies or key in pins or key == "kafkette" or (name == "kafkette" and key in skip):
                continue
            pins[key] = distribution(requirement.name).version
            pending.append((requirement.name, tuple(requirement.extras)))
    return pins


def locks() -> dict[str, dict[str, str]]:
    """Pinned requirements per dependency group; the groups are disjoint."""
    core = closure((), OPERATOR_ONLY)
    everything = closure(("spark",), frozenset())
    spark = closure(("spark",), OPERATOR_ONLY)
    if spark.get("pyspark") != pinned_pyspark():
        raise SystemExit(f"the venv has pyspark {spark.get('pyspark')}, pyproject pins {pinned_pyspark()}: make venv")
    return {
        "core": core,
        "operator": {name: version for name, version in everything.items() if name not in spark},
        "spark": {name: version for name, version in spark.items() if name not in core},
    }


# --- layers ------------------------------------------------------------------------------------------


def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, check=True, text=True, **kwargs)


def blob_path(digest: str) -> Path:
    return CACHE / "oci" / "blobs" / "sha256" / digest.removeprefix("sha256:")


def cached_layer(key: str) -> Layer | None:
    record = CACHE / "layers" / f"{key}.json"
    if not record.exists():
        return None
    layer = Layer(**json.loads(record.read_text()))
    return layer if blob_path(layer.digest).exists() else None


def pack(root: Path, key: str, comment: str) -> Layer:
    """A gzipped tar of the tree under `root` (owners and modes as on disk) as a blob, recorded under `key`."""
    staging = CACHE / "tmp" / f"{key}.tar.gz"
    staging.parent.mkdir(parents=True, exist_ok=True)
    with staging.open("wb") as raw:
        compressed = HashingWriter(raw)
        with gzip.GzipFile(fileobj=compressed, mode="wb", mtime=0, compresslevel=6) as zipped:
            uncompressed = HashingWriter(zipped)
            write_tar(root, uncompressed)
    digest = "sha256:" + compressed.hasher.hexdigest()
    target = blob_path(digest)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging.replace(target)
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    diff_id = "sha256:" + uncompressed.hasher.hexdigest()
    layer = Layer(digest, diff_id, compressed.length, uncompressed.length, comment, created)
    record = CACHE / "layers" / f"{key}.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(layer.__dict__))
    return layer


def write_tar(root: Path, output: HashingWriter) -> None:
    """The tree under `root` as a tar stream: numeric owners, modes and times as on disk, stable order."""
    with tarfile.open(fileobj=output, mode="w|", format=tarfile.PAX_FORMAT) as archive:  # type: ignore[call-overload]
        for path in sorted_tree(root):
            info = archive.gettarinfo(str(path), arcname=str(path.relative_to(root)))
            info.uname = info.gname = ""
            if info.isreg():
                with path.open("rb") as handle:
                    archive.addfile(info, handle)
            else:
                archive.addfile(info)


class Writable(Protocol):
    def write(self, data: bytes, /) -> int: ...

    def flush(self) -> None: ...


class HashingWriter:
    """Passes writes through, hashing and counting them: a layer's digest is that of the gzip stream, its
    diff id that of the tar inside."""

    def __init__(self, target: Writable) -> None:
        self.target = target
        self.hasher = hashlib.sha256()
        self.length = 0

    def write(self, data: bytes) -> int:
        self.hasher.update(data)
        self.length += len(data)
        return self.target.write(data)

    def flush(self) -> None:
        self.target.flush()


def sorted_tree(root: Path) -> Iterator[Path]:
    """Every entry below `root`, parents before children, in a stable order (symlinked folders as links)."""
    for directory, subdirs, names in os.walk(root):
        subdirs.sort()
        for name in sorted([*subdirs, *names]):
            yield Path(directory) / name


def layer(key: str, comment: str, make: Callable[[Path], None]) -> Layer:
    """The cached layer for `key`, or one packed from the tree `make(root)` fills."""
    found = cached_layer(key)
    if found is not None:
        return found
    timer = Timer()
    with tempfile.TemporaryDirectory(dir=CACHE) as scratch:
        root = Path(scratch) / "root"
        root.mkdir()
        make(root)
        made = pack(root, key, comment)
    print(f"  layer {comment}: {made.size / 2**20:.1f} MiB compressed, {timer}", flush=True)
    return made


def mmdebstrap_command(base: Base, target: Path, debs: Path) -> list[str]:
    user = base.user
    passwd = f"{user.name}:x:{user.uid}:{user.uid}::{user.home}:/usr/sbin/nologin"
    return [
        "mmdebstrap",
        "--quiet",
        "--mode=root",
        "--variant=essential",
        f"--include={','.join((*base.packages, 'usr-is-merged'))}",
        "--aptopt=APT::Install-Recommends false",
        "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
        *(f"--dpkgopt=path-exclude=/usr/share/{folder}/*" for folder in ("doc", "man", "info", "locale")),
        # Copyright files are the one part of /usr/share/doc a distribution must keep.
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        # Downloaded packages are kept (outside the key) so a changed package list fetches only what is new.
        "--skip=download/empty",
        "--skip=essential/unlink",
        f'--setup-hook=mkdir -p "$1"/var/cache/apt/archives {debs}',
        f"--setup-hook=sync-in {debs} /var/cache/apt/archives",
        # The JRE's postinst links its man pages there and fails when the folder is missing.
        '--setup-hook=mkdir -p "$1"/usr/share/man/man1',
        f"--customize-hook=sync-out /var/cache/apt/archives {debs}",
        # The essential variant has no useradd: the user's entries are written as useradd would.
        f"--customize-hook=echo '{passwd}' >> \"$1\"/etc/passwd",
        f"--customize-hook=echo '{user.name}:x:{user.uid}:' >> \"$1\"/etc/group",
        f'--customize-hook=install -d -m 0750 -o {user.uid} -g {user.uid} "$1"{user.home}',
        '--customize-hook=rm -rf "$1"/var/cache/* "$1"/var/log/* "$1"/var/lib/apt/lists/*',
        SUITE,
        str(target),
        str(APT_SOURCES),
    ]


def base_layer(base: Base) -> Layer:
    # Keyed by what goes into the rootfs, not by where the cache lives.
    command = mmdebstrap_command(base, Path("ROOT"), Path("DEBS"))
    key = "base-" + digest_of(RECIPE, *command, APT_SOURCES.read_text())

    def make(root: Path) -> None:
        root.rmdir()  # mmdebstrap wants to create its target itself
        made = subprocess.run(mmdebstrap_command(base, root, DEBS), capture_output=True, text=True)
        if made.returncode != 0:
            raise SystemExit(f"mmdebstrap failed:\n{made.stdout[-3000:]}{made.stderr[-3000:]}")

    return layer(key, f"debian {' '.join(base.packages)}", make)


def fix_scripts(root: Path, target: Path) -> None:
    """pip writes console scripts for its own interpreter: move them to /usr/local/bin for the image's."""
    scripts = target / "bin"
    if not scripts.exists():
        return
    destination = root / "usr" / "local" / "bin"
    destination.mkdir(parents=True, exist_ok=True)
    for script in scripts.iterdir():
        lines = script.read_bytes().split(b"\n", 1)
        if lines[0].startswith(b"#!") and b"python" in lines[0]:
            script.write_bytes(b"#!/usr/bin/python3\n" + (lines[1] if len(lines) > 1 else b""))
        script.replace(destination / script.name)
    scripts.rmdir()


def trim_and_compile(target: Path) -> None:
    """Drop debug symbols from native modules, then byte-compile as the image will see the files.

    The image runs as a user who cannot write __pycache__, so without this every start would compile."""
    libraries = [
        str(path) for path in target.rglob("*.so*") if SHARED_LIBRARY.search(path.name) and not path.is_symlink()
    ]
    if libraries:
        run(["strip", "--strip-debug", *libraries])
    run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", "-d", f"/{SITE_PACKAGES}", str(target)],
        stdout=subprocess.DEVNULL,
    )


def pip_install(root: Path, arguments: list[str]) -> None:
    target = root / SITE_PACKAGES
    target.parent.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
    run([*pip, "--no-deps", "--target", str(target), *arguments])
    fix_scripts(root, target)
    trim_and_compile(target)


def dependency_layer(group: str, pins: Mapping[str, str]) -> Layer:
    requirements = [f"{name}=={version}" for name, version in sorted(pins.items())]
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    key = f"deps-{group}-" + digest_of(RECIPE, python, *requirements)
    return layer(key, f"python dependencies ({group})", lambda root: pip_install(root, requirements))


def build_tools() -> Path:
    """setuptools as pyproject.toml's build-system asks, cached once, so building the wheel needs no network."""
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    target = CACHE / "build-tools" / digest_of(*requires)[:16]
    if not target.exists():
        scratch = target.with_suffix(".tmp")
        shutil.rmtree(scratch, ignore_errors=True)
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        run([*pip, "--target", str(scratch), *requires])
        scratch.replace(target)
    return target


def application_sources() -> list[Path]:
    return [REPO / name for name in ("pyproject.toml", "setup.py", "README.md", "broker", "operator", "pipeline")]


@functools.cache
def application_layer() -> Layer:
    """The kafkette wheel, built from the working tree (uncommitted changes included)."""
    key = "app-" + digest_of(RECIPE, content_hash(application_sources()))

    def make(root: Path) -> None:
        # Built from a copy: setuptools' build/ folder in the clone would carry modules deleted since.
        source = root.parent / "source"
        for path in application_sources():
            if path.is_dir():
                shutil.copytree(path, source / path.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                source.mkdir(exist_ok=True)
                shutil.copy2(path, source / path.name)
        wheels = root.parent / "wheels"
        environment = {**os.environ, "PYTHONPATH": str(build_tools())}
        wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps"]
        run([*wheel, "--no-build-isolation", "--wheel-dir", str(wheels), str(source)], env=environment)
        pip_install(root, [str(path) for path in wheels.glob("kafkette-*.whl")])

    return layer(key, "kafkette", make)


def spark_layer() -> Layer:
    """Spark's Kafka connector where kafkette.pipeline.connector looks for it, and the container entrypoint."""
    jars = connector.jars()
    if not jars:
        raise SystemExit(f"Spark's Kafka connector is not in {connector.jar_dir()}: make spark-kafka")
    entrypoint = REPO / "images" / "spark" / "entrypoint.py"
    key = "spark-" + digest_of(RECIPE, content_hash([*jars, entrypoint]))

    def make(root: Path) -> None:
        folder = root / SPARK_CACHE.lstrip("/") / connector.jar_dir().name
        folder.mkdir(parents=True)
        for jar in jars:
            shutil.copy2(jar, folder / jar.name)
        (folder / connector.STAMP).touch()
        script = root / SPARK_ENTRYPOINT.lstrip("/")
        script.parent.mkdir(parents=True)
        shutil.copy2(entrypoint, script)
        script.chmod(0o755)

    return layer(key, f"spark kafka connector ({len(jars)} jars) and entrypoint", make)


# --- OCI layout --------------------------------------------------------------------------------------


def write_blob(data: bytes) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    path = blob_path(digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_bytes(data)
    return {"digest": digest, "size": len(data)}


def image_config(image: Image, layers: list[Layer]) -> dict[str, Any]:
    return {
        "architecture": "amd64",
        "os": "linux",
        "config": dict(image.config),
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        # Times from the layers, not the clock, so an unchanged image keeps its digest.
        "created": max(layer.created for layer in layers),
        "history": [{"created": layer.created, "created_by": layer.comment} for layer in layers],
    }


def manifest_descriptor(image: Image, tag: str, layers: list[Layer]) -> dict[str, Any]:
    """Writes the image's config and manifest blobs; returns the manifest's descriptor for index.json."""
    config = write_blob(json.dumps(image_config(image, layers), sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
        "layers": [{"mediaType": LAYER_MEDIA_TYPE, "digest": layer.digest, "size": layer.size} for layer in layers],
    }
    return {
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        **write_blob(json.dumps(manifest, sort_keys=True).encode()),
        "platform": {"architecture": "amd64", "os": "linux"},
        "annotations": {
            # containerd names the imported image after this; kubelet looks images up by the normalized name.
            "io.containerd.image.name": f"docker.io/{image.repository}:{tag}",
            "org.opencontainers.image.ref.name": image.repository.split("/")[-1],
        },
    }


def index(manifests: Sequence[Mapping[str, Any]]) -> bytes:
    return json.dumps(
        {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": manifests},
        sort_keys=True,
        indent=1,
    ).encode()


def write_layout(manifests: list[dict[str, Any]]) -> None:
    """CACHE/oci as an OCI layout holding the three images: umoci and skopeo read it as it is, and a tar of
    the folder is an archive `ctr images import` takes on any host."""
    layout = CACHE / "oci"
    (layout / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    (layout / "index.json").write_bytes(index(manifests))


def blobs_of(manifest: Mapping[str, Any]) -> list[str]:
    content = json.loads(blob_path(manifest["digest"]).read_bytes())
    return [manifest["digest"], content["config"]["digest"], *(layer["digest"] for layer in content["layers"])]


def archive(manifest: Mapping[str, Any], path: Path, blobs: Iterable[str]) -> None:
    """One image as an OCI archive for `ctr images import`, with the blobs the importer lacks."""
    scratch = path.with_suffix(".tmp")
    with tarfile.open(scratch, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", index([manifest]))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for digest in blobs:
            tar.add(blob_path(digest), arcname=f"blobs/sha256/{digest.removeprefix('sha256:')}")
    scratch.replace(path)


def prune(manifests: list[dict[str, Any]]) -> None:
    """Remove blobs and layer records no current image uses (old code layers pile up otherwise)."""
    keep = {digest for manifest in manifests for digest in blobs_of(manifest)}
    for record in (CACHE / "layers").glob("*.json"):
        if json.loads(record.read_text())["digest"] not in keep:
            record.unlink()
    for blob in (CACHE / "oci" / "blobs" / "sha256").iterdir():
        if f"sha256:{blob.name}" not in keep:
            blob.unlink()


# --- the node ----------------------------------------------------------------------------------------


def node_containerd() -> dict[str, str] | None:
    """CONTAINERD_ADDRESS and CONTAINERD_NAMESPACE from e2e/.node/env, or None when there is no node."""
    if not NODE_ENV.exists():
        return None
    script = 'source "$1" && printf "%s\\n%s\\n" "$CONTAINERD_ADDRESS" "$CONTAINERD_NAMESPACE"'
    address, namespace = run(["bash", "-c", script, "bash", str(NODE_ENV)], capture_output=True).stdout.split("\n")[:2]
    if not address or not namespace:
        raise SystemExit(f"{NODE_ENV} sets no CONTAINERD_ADDRESS or CONTAINERD_NAMESPACE")
    return {"CONTAINERD_ADDRESS": address, "CONTAINERD_NAMESPACE": namespace}


def ctr(arguments: list[str], containerd: Mapping[str, str]) -> str:
    return run(["ctr", *arguments], capture_output=True, env={**os.environ, **containerd}).stdout


def loaded_digest(name: str, containerd: Mapping[str, str]) -> str | None:
    rows = [line.split() for line in ctr(["images", "ls", f"name=={name}"], containerd).splitlines()[1:] if line]
    return rows[0][2] if rows else None


def load(manifest: Mapping[str, Any], containerd: Mapping[str, str]) -> bool:
    """Import the image unless containerd already has this manifest under its name.

    The archive carries only the blobs containerd lacks (the importer takes the others from its content
    store), so after a code change only the top layer travels, not Spark's 600 MB."""
    if loaded_digest(manifest["annotations"]["io.containerd.image.name"], containerd) == manifest["digest"]:
        return False
    present = set(ctr(["content", "ls", "--quiet"], containerd).split())
    path = CACHE / "tmp" / f"import-{manifest['digest'][7:]}.tar"
    path.parent.mkdir(parents=True, exist_ok=True)
    archive(manifest, path, [digest for digest in blobs_of(manifest) if digest not in present])
    try:
        ctr(["images", "import", str(path)], containerd)
    finally:
        path.unlink()
    return True


# --- main --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Built:
    image: Image
    manifest: dict[str, Any]
    layers: list[Layer]

    def summary(self) -> str:
        compressed = sum(layer.size for layer in self.layers) / 2**20
        unpacked = sum(layer.unpacked for layer in self.layers) / 2**20
        return f"{self.manifest['digest'][7:19]}, {compressed:.0f} MiB compressed, {unpacked:.0f} MiB unpacked"


def build(tag: str) -> list[Built]:
    pins = locks()
    built: list[Built] = []
    for image in images():
        print(f"{image.repository}:{tag}", flush=True)
        layers = [base_layer(image.base), *(dependency_layer(group, pins[group]) for group in image.groups)]
        if image.spark:
            layers.append(spark_layer())
        layers.append(application_layer())
        built.append(Built(image, manifest_descriptor(image, tag, layers), layers))
    return built


def main() -> int:
    if os.geteuid() != 0:
        print("make images runs as root (mmdebstrap, and files owned by the images' users)", file=sys.stderr)
        return 1
    timer = Timer()
    CACHE.mkdir(parents=True, exist_ok=True)
    with exclusive(CACHE / "lock"):
        return build_and_load(timer)


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """One build at a time (`make e2e` and a hand-run `make images` share the cache)."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def build_and_load(timer: Timer) -> int:
    tag = project_version()
    built = build(tag)
    manifests = [item.manifest for item in built]
    write_layout(manifests)
    prune(manifests)
    containerd = node_containerd()
    for item in built:
        line = f"{item.image.repository}:{tag} {item.summary()}"
        if containerd is not None:
            line += ", imported" if load(item.manifest, containerd) else ", already in the node"
        print(line, flush=True)
    if containerd is None:
        print(f"no node ({NODE_ENV} is missing): built only; `make node` and rerun to load the images")
    print(f"images ready in {timer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
