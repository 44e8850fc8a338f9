"""What every Kafkette custom resource shares: camelCase fields, conditions, and its CRD's identity.

The pydantic models are the source of truth for the CRD schemas (`kafkette.operator.crds` turns them
into OpenAPI), so every field carries a description for `kubectl explain`, and validation that the
API server can enforce is expressed as JSON-schema constraints or CEL rules on the models themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonDict

GROUP = "kafkette.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"


def cel(rule: str, message: str) -> dict[str, Any]:
    """One `x-kubernetes-validations` entry: a CEL rule the API server checks, and what it says when false."""
    return {"rule": rule, "message": message}


# A field's CEL rule that refuses any change on update (unset fields are not checked).
IMMUTABLE: JsonDict = {"x-kubernetes-validations": [cel("self == oldSelf", "cannot change after creation")]}


class Model(BaseModel):
    """Kubernetes spells fields in camelCase; Python code uses snake_case names for the same fields."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="forbid")

    def to_api(self) -> dict[str, Any]:
        """The object as the API server stores it: camelCase keys, unset optionals left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def cluster_ref(held: str) -> Any:
    """The `clusterRef` field of a resource held by a KafkaCluster (a Topic, a KafkaUser): fixed at creation."""
    return Field(
        min_length=1,
        max_length=253,
        description=f"The name of the KafkaCluster, in the same namespace, that holds the {held}.",
        json_schema_extra={"x-kubernetes-validations": [cel("self == oldSelf", "clusterRef cannot change")]},
    )


def cluster_column(held: str) -> PrinterColumn:
    return PrinterColumn("Cluster", ".spec.clusterRef", description=f"The KafkaCluster holding the {held}")


class Condition(Model):
    """A Kubernetes-style condition: one aspect of the resource's state and when it last changed."""

    type: str = Field(description="The aspect this condition reports, for example Ready.")
    status: Literal["True", "False", "Unknown"] = Field(description="Whether the aspect holds.")
    reason: str = Field(description="A CamelCase word for why, stable enough for automation to match on.")
    message: str = Field("", description="A readable explanation for people.")
    last_transition_time: str = Field(description="When status last changed (RFC 3339).")
    observed_generation: int | None = Field(
        None, ge=0, description="The metadata.generation this condition was computed from."
    )


def now() -> str:
    """The current time in the RFC 3339 form Kubernetes uses for timestamps."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    conditions: list[Condition],
    type: str,
    status: Literal["True", "False", "Unknown"],
    reason: str,
    message: str,
    observed_generation: int | None = None,
) -> list[Condition]:
    """Conditions with `type` set; lastTransitionTime moves only when the status changes (as in Kubernetes)."""
    previous = next((condition for condition in conditions if condition.type == type), None)
    changed = previous is None or previous.status != status
    updated = Condition(
        type=type,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=now() if changed or previous is None else previous.last_transition_time,
        observed_generation=observed_generation,
    )
    return [updated if condition.type == type else condition for condition in conditions] + (
        [updated] if previous is None else []
    )


Phase = Literal["Ready", "Reconciling", "Stalled"]
# kstatus (sigs.k8s.io/cli-utils) reads Reconciling=True as "in progress" and Stalled=True as "failed";
# Flux and Argo CD health checks read those, Ready is what people and `kubectl wait` read.
PHASES: tuple[Phase, ...] = ("Ready", "Reconciling", "Stalled")


@dataclass(frozen=True)
class Outcome:
    """What one reconcile found: done (Ready), work under way (Reconciling), or stuck until a person acts (Stalled)."""

    phase: Phase
    reason: str
    message: str


def phase_conditions(conditions: list[Condition], generation: int, outcome: Outcome) -> list[Condition]:
    """Ready, Reconciling and Stalled set together, exactly one of them True, each naming `generation`."""
    for phase in PHASES:
        holds = phase == outcome.phase
        # Ready=False carries the reason it is not ready; the other False conditions name the phase that holds.
        explains = holds or phase == "Ready"
        conditions = set_condition(
            conditions,
            phase,
            "True" if holds else "False",
            outcome.reason if explains else outcome.phase,
            outcome.message if explains else "",
            generation,
        )
    return conditions


class Status(Model):
    """Status fields every resource has; each kind extends it."""

    observed_generation: int | None = Field(
        None, ge=0, description="The metadata.generation the operator last reconciled."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="The latest observations of the resource's state.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


@dataclass(frozen=True)
class PrinterColumn:
    """A column `kubectl get` shows for the kind."""

    name: str
    json_path: str
    type: Literal["string", "integer", "number", "boolean", "date"] = "string"
    description: str = ""
    priority: int = 0

    def to_api(self) -> dict[str, Any]:
        column: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description:
            column["description"] = self.description
        if self.priority:
            column["priority"] = self.priority
        return column


READY_COLUMN = PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status', description="Reconciled")
AGE_COLUMN = PrinterColumn("Age", ".metadata.creationTimestamp", "date")


@dataclass(frozen=True)
class Scale:
    """The `/scale` subresource: which spec and status fields hold the replica count."""

    spec_path: str
    status_path: str
    selector_path: str | None = None

    def to_api(self) -> dict[str, Any]:
        scale = {"specReplicasPath": self.spec_path, "statusReplicasPath": self.status_path}
        if self.selector_path:
            scale["labelSelectorPath"] = self.selector_path
        return scale


@dataclass(frozen=True)
class Kind:
    """A custom resource kind: its identity, CRD trimmings, and the models its schema comes from."""

    kind: str
    plural: str
    short_names: tuple[str, ...]
    description: str
    spec: type[Model]
    status: type[Status]
    columns: tuple[PrinterColumn, ...] = ()
    scale: Scale | None = None
    # CEL rules over the whole object (they may read metadata.name), as x-kubernetes-validations at the root.
    validations: tuple[dict[str, Any], ...] = ()
    categories: tuple[str, ...] = field(default=("kafkette",))

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{GROUP}"
