"""A consumer group as the coordinator describes it: state, protocol and members.

The job never joins its own group: Spark assigns partitions to its readers, and
the runtime commits offsets from a consumer that never subscribes. So every
member the coordinator lists is a consumer that is not the job, whichever
protocol it speaks (classic, or KIP-848's ``consumer``): someone else reads
with the job's group id, and its commits overwrite the job's. That is why a
reset or restore refuses while the group has members, and why verify shows them.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_kafka_stream.core.offsets import TopicPartition

#: States in which the group has (or is gaining) members, by Kafka's names for both protocols: offsets cannot be
#: changed from outside, and someone consumes with the group id.
ACTIVE_STATES = frozenset({"Stable", "PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"})
#: States that prove nothing about emptiness: members may be joining.
UNPROVEN_STATES = frozenset({"Unknown"})


@dataclass(frozen=True)
class GroupMember:
    """One member of a group, as ``kafka-consumer-groups --describe --members`` lists it."""

    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None = None
    assignment: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        """``client.id reader-1 on host /10.0.0.5`` (and the static instance id, when it has one)."""
        instance = f", group.instance.id {self.group_instance_id}" if self.group_instance_id else ""
        return f"client.id {self.client_id or '?'} on host {self.host or '?'}{instance}"

    def to_dict(self) -> dict:
        return {"member_id": self.member_id, "client_id": self.client_id, "host": self.host,
                "group_instance_id": self.group_instance_id,
                "assignment": [str(tp) for tp in self.assignment]}


@dataclass(frozen=True)
class GroupDescription:
    """What the group coordinator says about a group (a group that never existed is ``Dead`` with no members)."""

    group: str
    state: str
    protocol: str  # "classic", "consumer" (KIP-848), or "unknown"
    members: tuple[GroupMember, ...] = ()

    @property
    def foreign_members(self) -> tuple[GroupMember, ...]:
        """Members that are not the job: all of them (the job never joins its group, see the module's note)."""
        return self.members

    @property
    def in_use(self) -> bool:
        """Someone consumes with the group id, or may be joining: changing its offsets from outside is unsafe."""
        return bool(self.members) or self.state in ACTIVE_STATES or self.state in UNPROVEN_STATES

    def members_text(self) -> str:
        """The members for a message: ``client.id a on host /h (member m), ...``, or ``none``."""
        return ", ".join(f"{m.describe()} (member {m.member_id})" for m in self.members) or "none"

    def to_dict(self) -> dict:
        return {"group": self.group, "state": self.state, "protocol": self.protocol,
                "members": [m.to_dict() for m in self.members]}
