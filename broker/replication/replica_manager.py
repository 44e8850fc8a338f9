"""This broker's partition replicas, kept in line with the metadata image.

Each new image opens the logs of partitions assigned here, deletes those of
partitions no longer assigned, and on a leader epoch change makes the
partition leader, follower (handed to the fetcher of its leader's broker) or
offline. Leaders' ISR changes go to the controller through the IsrSender.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from kafkette.broker.clocks import monotonic_ms
from kafkette.broker.config import BrokerConfig, DynamicBrokerConfigs, effective_topic_config
from kafkette.broker.controller.image import MetadataImage, PartitionImage, TopicImage
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.replication.fetcher import ReplicaFetcher
from kafkette.broker.replication.isr_sender import AlterPartition, IsrSender
from kafkette.broker.replication.log_dir_mover import LogDirMover
from kafkette.broker.replication.partition import Partition, PartitionHost, PartitionSettings
from kafkette.broker.replication.role_changes import RoleChanges
from kafkette.broker.replication.throttle import ReplicationQuota, ThrottledReplicas, throttled_on
from kafkette.broker.replication.topic_settings import log_config_of, partition_settings_of
from kafkette.broker.storage import Log, LogConfig, LogManager, TopicPartition
from kafkette.broker.tasks import cancel_and_wait

logger = logging.getLogger(__name__)

NO_LEADER = -1
# When an image takes at least this many partitions away from this broker, or a start finds this many stray logs,
# their directories are renamed and removed in a worker thread (10,000 on the event loop held it 8 s); fewer at once.
DELETE_FILES_IN_THREAD_AT = 200
# Partitions an image application makes, changes or takes away between two turns of the event loop, when it goes in
# steps (`ReplicaManager.apply_changes_in_steps`): about 15 ms of the loop's time for new leaders.
APPLY_STEP = 1000

PartitionKey = tuple[str, int]

_NO_KEYS: Mapping[PartitionKey, TopicPartition] = {}


@dataclass(frozen=True, slots=True)
class _TopicSettings:
    overrides: dict[str, str]
    dynamic: DynamicBrokerConfigs  # broker configs changed at run time: the topic's defaults
    log_config: LogConfig
    settings: PartitionSettings
    min_insync_replicas: int


@dataclass(frozen=True, slots=True)
class ImageChanges:
    """What applying an image changes on this broker (`ReplicaManager.changes`)."""

    image: MetadataImage
    changed: list[tuple[TopicPartition, TopicImage, PartitionImage, _TopicSettings]]  # the states the last image lacked
    assigned: set[PartitionKey]  # every partition with a replica here: the others' replicas go
    used: dict[str, _TopicSettings]
    missing_logs: list[tuple[TopicPartition, LogConfig]]  # partitions new here that have no log yet


class ReplicaManager:
    def __init__(
        self,
        node_id: int,
        config: BrokerConfig,
        logs: LogManager,
        alter_partition: AlterPartition,
        broker_epoch: Callable[[], int],
        *,
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.node_id = node_id
        self.config = config
        self._logs = logs
        self._broker_epoch = broker_epoch
        self._image = MetadataImage()
        self._applied = self._image  # the last image every partition took, with each topic's settings
        self._applied_settings: dict[str, _TopicSettings] = {}
        self._partitions: dict[PartitionKey, Partition] = {}
        # Leaders with an ISR follower that may be behind (Partition._may_fall_behind): what the ISR check walks.
        self._behind: set[Partition] = set()
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._topic_settings: dict[str, _TopicSettings] = {}
        # Replication throttles: what this broker sends as a leader, and fetches as a follower.
        self.leader_throttle = ReplicationQuota()
        self.follower_throttle = ReplicationQuota()
        self.log_dir_mover = LogDirMover(logs, self._log_swapped)
        self._isr_checker: asyncio.Task[None] | None = None
        self._isr_sender = IsrSender(node_id, alter_partition, broker_epoch)
        self._stopped = False
        # Shared by every partition: this broker, its clock, where ISR proposals go and the ISR check's watch.
        self._partition_host = PartitionHost(node_id, clock, self._isr_sender.submit, self._behind)

    # -- what the broker reads ---------------------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition | None:
        return self._partitions.get((topic, index))

    def partitions(self) -> Iterator[Partition]:
        return iter(list(self._partitions.values()))

    def fetcher(self, leader_id: int) -> ReplicaFetcher | None:
        return self._fetchers.get(leader_id)

    # -- images ------------------------------------------------------------------------------------

    def apply(self, image: MetadataImage) -> None:
        """Bring the replicas in line with ``image`` (called on the event loop for every new image)."""
        self.apply_changes(self.changes(image))

    def changes(self, image: MetadataImage, keys: Mapping[PartitionKey, TopicPartition] = _NO_KEYS) -> ImageChanges:
        """What applying ``image`` changes here, from one walk of the partitions it assigns to this broker; the
        caller may create the missing logs (`LogManager.create_in_thread`) before it applies them, and then pass
        their keys as ``keys``, for the partitions to be keyed by the objects the log manager keys their logs by."""
        changed: list[tuple[TopicPartition, TopicImage, PartitionImage, _TopicSettings]] = []
        assigned: set[PartitionKey] = set()
        used: dict[str, _TopicSettings] = {}
        missing: list[tuple[TopicPartition, LogConfig]] = []
        for topic, index, state, settings, unchanged in self._assigned(image):
            used[topic.name] = settings
            assigned.add((topic.name, index))
            if unchanged:
                continue
            # One key object for the replica manager's map and the log manager's (two were 64 B more a partition).
            key = keys.get((topic.name, index)) or TopicPartition(topic.name, index)
            changed.append((key, topic, state, settings))
            if key not in self._partitions and self._logs.get(topic.name, index) is None:
                missing.append((key, settings.log_config))
        return ImageChanges(image, changed, assigned, used, missing)

    def apply_changes(self, changes: ImageChanges) -> None:
        """Apply what `changes` found, with nothing else changed here in between (both run on the event loop)."""
        for _ in self._applying(changes):
            pass

    def applies_in_steps(self, changes: ImageChanges) -> bool:
        """Whether `changes` takes or changes so many partitions here that `apply_changes_in_steps` should apply
        them (an estimate, from counts alone: either way of applying is right)."""
        return len(changes.changed) > APPLY_STEP or len(self._partitions) - len(changes.assigned) > APPLY_STEP

    async def apply_changes_in_steps(self, changes: ImageChanges) -> None:
        """`apply_changes` giving the event loop a turn after every `APPLY_STEP` partitions it makes, changes or
        takes away, as Kafka's request threads go on while its replica manager applies a delta: 5,000 new leaders
        held every client 70-80 ms at once. A partition not reached yet answers as under the image before."""
        for _ in self._applying(changes):
            await asyncio.sleep(0)

    def _applying(self, changes: ImageChanges) -> Iterator[None]:
        """Applies `changes`, yielding after each `APPLY_STEP` partitions; stops when the manager is stopped meanwhile
        (images still arriving during shutdown must not restart fetchers)."""
        if self._stopped:
            return
        image = changes.image
        self._image = image
        self._configure_throttles(image)
        roles = RoleChanges()
        for done, (tp, topic, state, settings) in enumerate(changes.changed, 1):
            self._apply_partition(tp, topic, state, settings, roles)
            if done % APPLY_STEP == 0:
                yield
                if self._stopped:
                    return
        for line in roles.lines():
            logger.info("%s", line)
        gone = [key for key in self._partitions if key not in changes.assigned]
        for start in range(0, len(gone), APPLY_STEP):
            if start:
                yield
                if self._stopped:
                    return
            self._remove_all(gone[start : start + APPLY_STEP])
        for name in [name for name in self._topic_settings if image.topic_by_name(name) is None]:
            del self._topic_settings[name]
        # Only once every partition took the image: after one that raised, the next walks all it changed again.
        self._applied, self._applied_settings = image, changes.used
        self._start_isr_checker()

    def _assigned(self, image: MetadataImage) -> Iterator[tuple[TopicImage, int, PartitionImage, _TopicSettings, bool]]:
        """Each partition ``image`` assigns here, with its topic's settings and whether the last image applied
        in full gave it this very state.

        An image shares the states of the partitions it did not change with the one before: one ISR change among
        10,000 partitions must not walk all of them through the replicas (an ISR storm after a broker was fenced
        took minutes of event loop with every image applied in full)."""
        for topic in image.topics.values():
            settings: _TopicSettings | None = None
            unchanged: Mapping[int, PartitionImage] = {}
            for index, state in topic.partitions.items():
                if self.node_id not in state.replicas:
                    continue
                if settings is None:
                    settings = self._settings_of(image, topic.name)
                    unchanged = self._unchanged_since_applied(topic, settings)
                yield topic, index, state, settings, state is unchanged.get(index)

    def _unchanged_since_applied(self, topic: TopicImage, settings: _TopicSettings) -> Mapping[int, PartitionImage]:
        """The states of the topic's partitions as the last image applied in full had them, and so gave them;
        none when the topic's settings changed since (`_settings_of` keeps the very object while they stand)."""
        applied = self._applied.topics.get(topic.topic_id)
        if applied is None or self._applied_settings.get(topic.name) is not settings:
            return {}
        return applied.partitions

    def _configure_throttles(self, image: MetadataImage) -> None:
        """The throttle rates (this broker's dynamic config, else the cluster default, else server.properties)
        and each topic's throttled replicas on this broker."""
        dynamic = image.broker_configs(self.node_id)

        def rate(key: str, static: int) -> int:
            found = dynamic.lookup(key)
            return int(found[0].value) if found and found[0].value is not None else static

        lists: dict[str, dict[str, ThrottledReplicas]] = {"leader": {}, "follower": {}}
        for topic in image.topics.values():
            configs = image.topic_configs(topic.name)
            for side, replicas in lists.items():
                value = configs.get(f"{side}.replication.throttled.replicas")
                if value:
                    replicas[topic.name] = throttled_on(value, self.node_id)
        leader_rate = rate("leader.replication.throttled.rate", self.config.leader_replication_throttled_rate)
        follower_rate = rate("follower.replication.throttled.rate", self.config.follower_replication_throttled_rate)
        self.leader_throttle.configure(leader_rate, lists["leader"])
        self.follower_throttle.configure(follower_rate, lists["follower"])
        self.log_dir_mover.quota.bytes_per_second = rate(
            "replica.alter.log.dirs.io.max.bytes.per.second", self.config.replica_alter_log_dirs_io_max_bytes_per_second
        )

    def _settings_of(self, image: MetadataImage, topic: str) -> _TopicSettings:
        overrides = dict(image.topic_configs(topic))
        dynamic = image.broker_configs(self.node_id)
        cached = self._topic_settings.get(topic)
        if cached is not None and cached.overrides == overrides and cached.dynamic == dynamic:
            return cached
        effective = effective_topic_config(self.config, overrides, dynamic)
        settings = _TopicSettings(
            overrides,
            dynamic,
            log_config_of(effective),
            partition_settings_of(effective, self.config.producer_id_expiration_ms),
            effective.min_insync_replicas,
        )
        self._topic_settings[topic] = settings
        return settings

    def _apply_partition(
        self,
        key: TopicPartition,
        topic: TopicImage,
        state: PartitionImage,
        settings: _TopicSettings,
        roles: RoleChanges,
    ) -> None:
        index = key.partition
        partition = self._partitions.get(key)
        if partition is not None and partition.topic_id != topic.topic_id:
            self._remove(key)  # the topic was deleted and created again under the same name
            partition = None
        if partition is None:
            log = self._logs.get_or_create_for(key, settings.log_config)
            if log.topic_id is not None and log.topic_id != topic.topic_id:
                # The log of an earlier topic of this name, deleted and created again while this broker was down:
                # kept, it would serve the old records as the new topic's, and as a follower truncate only to the
                # new leader's end and keep the rest (Kafka tells them apart by partition.metadata).
                logger.info("%s-%d: the log here is of an earlier topic %s; deleted", topic.name, index, log.topic_id)
                self._logs.delete(topic.name, index)
                log = self._logs.get_or_create_for(key, settings.log_config)
            log.topic_id = topic.topic_id
            partition = Partition(topic.name, index, topic.topic_id, log, settings.settings, self._partition_host)
            self._partitions[key] = partition
            self._configure(partition, settings)
            self._change_leadership(key, partition, state, roles)
            return
        self._configure(partition, settings)
        if state.leader_epoch > partition.leader_epoch:
            self._change_leadership(key, partition, state, roles)
        else:
            partition.update_assignment(state.partition_epoch, state.replicas, state.isr)

    @staticmethod
    def _configure(partition: Partition, settings: _TopicSettings) -> None:
        partition.settings = settings.settings
        if partition.log.config != settings.log_config:
            partition.log.config = settings.log_config
        partition.min_insync_replicas = settings.min_insync_replicas

    def _change_leadership(
        self, key: TopicPartition, partition: Partition, state: PartitionImage, roles: RoleChanges
    ) -> None:
        self._unfollow(partition)
        if state.leader == self.node_id:
            partition.become_leader(state.leader_epoch, state.partition_epoch, state.replicas, state.isr)
            roles.add(partition.topic, partition.index, f"leader at epoch {state.leader_epoch}, ISR {list(state.isr)}")
            return
        partition.become_follower(state.leader, state.leader_epoch, state.partition_epoch, state.replicas, state.isr)
        if state.leader == NO_LEADER:
            roles.add(partition.topic, partition.index, f"offline at epoch {state.leader_epoch}")
            return
        fetcher = self._fetchers.get(state.leader)
        if fetcher is None:
            fetcher = ReplicaFetcher(
                self.node_id, state.leader, self._address_of, self.config, self._broker_epoch, self.follower_throttle
            )
            self._fetchers[state.leader] = fetcher
        fetcher.add(partition, key)
        roles.add(partition.topic, partition.index, f"following broker {state.leader} at epoch {state.leader_epoch}")

    # -- moves between log directories ---------------------------------------------------------------

    def alter_log_dir(self, topic: str, index: int, path: str) -> ErrorCode:
        """AlterReplicaLogDirs for one replica, with Kafka's answers: LOG_DIR_NOT_FOUND for a directory not in
        log.dirs, KAFKA_STORAGE_ERROR for an offline one (or any offline while a copy would start, so that no
        partition gets copies in two dirs), REPLICA_NOT_AVAILABLE when the replica is not here yet (it will be
        created in that directory when it comes). A move elsewhere in flight is replaced; moving to where the
        replica already is cancels one."""
        log_dir = self._logs.configured_dir(path)
        if log_dir is None:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if log_dir in self._logs.offline_dirs:
            return ErrorCode.KAFKA_STORAGE_ERROR
        partition = self._partitions.get((topic, index))
        if partition is None:
            self._logs.prefer(topic, index, log_dir)
            return ErrorCode.REPLICA_NOT_AVAILABLE
        if partition.log.offline_reason is not None:
            return ErrorCode.KAFKA_STORAGE_ERROR
        future = self._logs.future(topic, index)
        if future is not None and future.directory.parent != log_dir:
            self._logs.cancel_future(topic, index)  # its copy task ends, or picks up the new future, next step
            future = None
        if future is not None or partition.log.directory.parent == log_dir:
            return ErrorCode.NONE
        if self._logs.offline_dirs:
            return ErrorCode.KAFKA_STORAGE_ERROR
        self._logs.create_future(topic, index, log_dir)
        self.log_dir_mover.start(TopicPartition(topic, index))
        return ErrorCode.NONE

    def resume_moves(self) -> None:
        """Carry on the moves between log dirs found at start-up, once caught up with the metadata log: the
        replicas are all known then, and so is the throttle (a dynamic config) that bounds the copies."""
        for tp in self._logs.all_futures():
            if (tp.topic, tp.partition) in self._partitions:
                self.log_dir_mover.start(tp)

    def _log_swapped(self, tp: TopicPartition, log: Log) -> None:
        partition = self._partitions.get((tp.topic, tp.partition))
        if partition is not None:
            partition.swap_log(log)

    def _address_of(self, broker_id: int) -> tuple[str, int] | None:
        """The leader's address in the newest image: a broker that re-registered is found at its new one."""
        broker = self._image.brokers.get(broker_id)
        endpoint = broker.endpoint(self.config.inter_broker_listener) if broker is not None else None
        return (endpoint.host, endpoint.port) if endpoint is not None else None

    def _unfollow(self, partition: Partition) -> None:
        for fetcher in self._fetchers.values():
            fetcher.remove(partition)

    def _remove(self, key: PartitionKey) -> None:
        self._stop_replicating(key)
        self._logs.delete(*key)
        logger.info("%s-%d: no longer replicated here; log deleted", *key)

    def _remove_all(self, keys: list[PartitionKey]) -> None:
        for key in keys:
            self._stop_replicating(key)
        self._delete_logs(keys, "no longer replicated here; log deleted")

    def _delete_logs(self, keys: list[PartitionKey], why: str) -> None:
        """Delete the logs of ``keys``: closed on the event loop, their directories renamed and removed in a worker
        thread when they are many, and logged one line per topic."""
        remove_files = self._logs.delete_many(keys)
        if len(keys) >= DELETE_FILES_IN_THREAD_AT:
            asyncio.get_running_loop().run_in_executor(None, remove_files)
        else:
            remove_files()
        deleted = RoleChanges()
        for topic, index in keys:
            deleted.add(topic, index, why)
        for line in deleted.lines():
            logger.info("%s", line)

    def _stop_replicating(self, key: PartitionKey) -> None:
        partition = self._partitions.pop(key)
        self._behind.discard(partition)
        self._unfollow(partition)
        partition.close()

    def delete_stray_logs(self) -> None:
        """Delete the logs on disk of partitions no longer replicated here: a move or a topic deletion that
        completed while this broker was down. Called once the broker has caught up with the metadata log (it is
        unfenced), so the image is complete, as Kafka does with stray logs at start-up."""
        strays = [(tp.topic, tp.partition) for tp in self._logs.all_logs() if tp not in self._partitions]
        if strays:
            self._delete_logs(strays, "not a replica here after catching up; stray log deleted")

    # -- ISR changes -------------------------------------------------------------------------------

    def _start_isr_checker(self) -> None:
        if self._isr_checker is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # applied outside the loop (tests): the first apply on the loop starts it
        self._isr_checker = loop.create_task(self._check_isr_periodically(), name="isr-shrink-check")

    async def _check_isr_periodically(self) -> None:
        lag_ms = self.config.replica_lag_time_max_ms
        while True:
            await asyncio.sleep(lag_ms / 2000)
            self.shrink_lagging_isrs()

    def shrink_lagging_isrs(self) -> None:
        """Propose ISRs without the followers that did not catch up within replica.lag.time.max.ms. Only leaders
        with a follower behind are walked: at 10,000 idle partitions every one was, each check."""
        lag_ms = self.config.replica_lag_time_max_ms
        for partition in list(self._behind):
            if not partition.maybe_shrink_isr(lag_ms):
                self._behind.discard(partition)
        if not self._behind:
            # Emptied by removals, a set keeps its table (every new partition enters it); clear() frees it.
            self._behind.clear()

    # -- shutdown ----------------------------------------------------------------------------------

    async def stop(self) -> None:
        """Stop fetching and ISR upkeep; produces still waiting get NOT_LEADER_OR_FOLLOWER."""
        self._stopped = True
        await cancel_and_wait(self._isr_checker)
        await self._isr_sender.stop()
        await self.log_dir_mover.stop()
        self._isr_checker = None
        for fetcher in self._fetchers.values():
            await fetcher.stop()
        self._fetchers.clear()
        for partition in self._partitions.values():
            partition.close()
