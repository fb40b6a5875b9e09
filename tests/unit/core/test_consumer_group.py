"""A group's description: when someone else uses the job's group id, and how its members are named."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.core.consumer_group import GroupDescription, GroupMember
from airflow_kafka_stream.core.offsets import TopicPartition

READER = GroupMember("m-1", "reader-1", "/10.0.0.5", assignment=(TopicPartition("orders", 0),))


@pytest.mark.parametrize(
    ("state", "members", "in_use"),
    [
        pytest.param("Dead", (), False, id="1-a-group-that-never-existed-is-free"),
        pytest.param("Empty", (), False, id="2-the-job-commits-without-joining-so-its-group-reads-empty"),
        pytest.param("Stable", (READER,), True, id="3-a-member-is-another-consumer"),
        pytest.param("Empty", (READER,), True, id="4-members-count-whatever-the-state-says"),
        pytest.param("PreparingRebalance", (), True, id="5-classic-members-joining"),
        pytest.param("Assigning", (), True, id="6-kip-848-members-being-assigned"),
        pytest.param("Reconciling", (), True, id="7-kip-848-members-reconciling"),
        pytest.param("Unknown", (), True, id="8-an-unknown-state-proves-nothing"),
    ],
)
def test_in_use(state, members, in_use):
    described = GroupDescription("g", state, "consumer", members)
    assert described.in_use is in_use
    assert described.foreign_members == members, "the job never joins its group: every member is someone else"


def test_members_are_named_by_client_id_and_host():
    two = GroupDescription("g", "Stable", "classic",
                           (READER, GroupMember("m-2", "", "/10.0.0.6", group_instance_id="static-2")))
    assert two.members_text() == ("client.id reader-1 on host /10.0.0.5 (member m-1), "
                                  "client.id ? on host /10.0.0.6, group.instance.id static-2 (member m-2)")
    assert GroupDescription("g", "Empty", "classic").members_text() == "none"
    assert two.to_dict()["members"][0] == {"member_id": "m-1", "client_id": "reader-1", "host": "/10.0.0.5",
                                           "group_instance_id": None, "assignment": ["orders:0"]}
