"""The ROS-side recall: JSON in std_msgs/String on request/response topics, matched by id."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from bridges.rosbridge.connection import RosbridgeConnection
from bridges.rosbridge.recall import (
    REQUEST_TOPIC,
    RESPONSE_TOPIC,
    RecallResponder,
    answer_request,
)
from bridges.rosbridge.testing import RosbridgeTestServer
from bridges.rosbridge.testing import messages as m
from robotmem import Memory


@pytest.fixture
def stocked(memory: Memory) -> Memory:
    memory.learn("the charging dock is behind the kitchen door", {"spatial": {"position": [4.0, 1.0, 0.0]},
                                                                  "robot": {"id": "tb3"}})
    memory.learn("the hallway carpet makes the wheels slip", {"spatial": {"position": [-3.0, 2.0, 0.0]},
                                                               "robot": {"id": "tb3"}})
    return memory


def ask(memory: Memory, request: Any) -> dict[str, Any]:
    text = request if isinstance(request, str) else json.dumps(request)
    return answer_request(memory, text, "robot")


def test_recall_request_is_answered_with_matching_results_and_its_id(stocked: Memory) -> None:
    answer = ask(stocked, {"id": "nav-1", "query": "where is the charging dock", "n": 1})
    assert answer["id"] == "nav-1" and answer["count"] == 1
    assert answer["results"][0]["content"] == "the charging dock is behind the kitchen door"


def test_recall_request_with_spatial_sort_returns_the_nearest_memory_first(stocked: Memory) -> None:
    answer = ask(stocked, {"id": 7, "n": 2, "spatial_sort": {"field": "spatial.position", "target": [-3, 2, 0]}})
    assert answer["id"] == 7
    assert answer["results"][0]["content"].startswith("the hallway carpet")


def test_recall_request_that_is_not_json_is_an_error_naming_data(stocked: Memory) -> None:
    answer = ask(stocked, "where is the dock?")
    assert answer == {"id": None, "error": answer["error"]}
    assert answer["error"]["code"] == "validation_error" and answer["error"]["field"] == "data"


def test_recall_request_without_id_is_an_error_naming_id(stocked: Memory) -> None:
    assert ask(stocked, {"query": "dock"})["error"]["field"] == "id"


def test_recall_request_with_unknown_field_is_an_error_naming_it(stocked: Memory) -> None:
    answer = ask(stocked, {"id": "a", "query": "dock", "limit": 3})
    assert (answer["id"], answer["error"]["field"]) == ("a", "limit")


def test_recall_request_with_wrongly_typed_n_is_an_error_naming_n(stocked: Memory) -> None:
    assert ask(stocked, {"id": "a", "query": "dock", "n": "five"})["error"]["field"] == "n"


def test_recall_request_with_unknown_filter_operator_carries_the_store_validation_error(stocked: Memory) -> None:
    answer = ask(stocked, {"id": "a", "query": "dock", "context_filter": {"robot.id": {"$near": "tb3"}}})
    assert answer["error"]["code"] == "validation_error"
    assert answer["error"]["field"].startswith("context_filter")


@pytest.fixture
def responder_on_server(rosbridge_server: RosbridgeTestServer, stocked: Memory,
                        fast_reconnect: dict[str, float]) -> Iterator[RecallResponder]:
    conn = RosbridgeConnection(rosbridge_server.url, **fast_reconnect)
    conn.open()
    responder = RecallResponder(stocked, conn.publish, collection="robot")
    responder.start()
    conn.advertise(RESPONSE_TOPIC, "std_msgs/String")
    conn.subscribe(REQUEST_TOPIC, "std_msgs/String", responder.on_message)
    rosbridge_server.wait_for_subscription(REQUEST_TOPIC)
    yield responder
    responder.stop()
    conn.close()


def test_ros_node_publishing_a_request_receives_the_answer_on_the_response_topic(
        rosbridge_server: RosbridgeTestServer, responder_on_server: RecallResponder) -> None:
    for request_id in ("first", "second"):
        rosbridge_server.publish(REQUEST_TOPIC, m.string(json.dumps({"id": request_id, "query": "wheels slip"})))
    answers = {}
    for request_id in ("first", "second"):
        raw = rosbridge_server.wait_for_message(
            RESPONSE_TOPIC, lambda msg, wanted=request_id: json.loads(msg["data"])["id"] == wanted)
        answers[request_id] = json.loads(raw["data"])
    assert all(a["results"][0]["content"] == "the hallway carpet makes the wheels slip" for a in answers.values())
    assert responder_on_server.answered == 2
