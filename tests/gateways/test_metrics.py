"""Metrics at the gateway's ``/metrics``: scraped and parsed as Prometheus would, counts moving as tasks run."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from agents.builtin.echo import EchoAgent
from tests.conftest import ServeAgent
from tests.gateways.conftest import StartGateway
from tests.gateways.jsonrpc_http import message, rpc

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample by (name, labels)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def scrape(http: httpx.AsyncClient, url: str) -> Samples:
    response = await http.get(f"{url}/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return parse(response.text)


def value(samples: Samples, name: str, **labels: str) -> float:
    """A sample's value; 0 for one not there yet (a counter before its first count)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_metrics_count_tasks_round_trips_and_refusals_as_requests_go_through(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, namespace: str
) -> None:
    await serve_agent(EchoAgent())
    gateway = await start_gateway(default_agent="echo")
    url, gw = gateway.public_url, gateway.settings.id
    echo = {"namespace": namespace, "component": "echo"}
    before = await scrape(http, url)
    completed = {"namespace": namespace, "agent": "echo", "state": "completed"}
    completed_before = value(before, "mesh_tasks_total", **completed)

    for n in range(3):
        response = await http.post(f"{url}/a2a", json=rpc("message/send", {"message": message(f"hi {n}")}))
        assert response.json()["result"]["status"]["state"] == "completed"
    after = await scrape(http, url)

    assert value(after, "mesh_tasks_total", **completed) == completed_before + 3
    assert value(after, "mesh_task_duration_seconds_count", namespace=namespace, agent="echo") == 3
    assert value(after, "mesh_task_duration_seconds_bucket", namespace=namespace, agent="echo", le="+Inf") == 3
    trips = {"namespace": namespace, "component": gw, "agent": "echo", "method": "message/send"}
    assert value(after, "mesh_call_round_trip_seconds_count", **trips) == 3
    assert 0 < value(after, "mesh_call_round_trip_seconds_sum", **trips) < 30
    # Gauges of running components: nothing in flight between requests, the registry's agents.
    assert value(after, "mesh_tasks_in_flight", **echo) == 0
    assert ("mesh_tasks_in_flight", frozenset({"namespace": namespace, "component": gw}.items())) in after
    assert value(after, "mesh_discovery_agents", namespace=namespace, component=gw) == 1
    assert ("mesh_queue_depth", frozenset(echo.items())) in after
    assert value(after, "mesh_reconnects_total", **echo) == 0

    # A malformed request: refused at the gateway, counted by reason.
    refused = {"namespace": namespace, "component": gw, "reason": "InvalidJSON"}
    response = await http.post(f"{url}/a2a", content=b"{not json", headers={"Content-Type": "application/json"})
    assert response.json()["error"]["code"] == -32700
    refusals_before = value(after, "mesh_bad_inputs_total", **refused)
    assert value(await scrape(http, url), "mesh_bad_inputs_total", **refused) == refusals_before + 1


async def test_an_edge_refusal_is_counted_by_its_error_type(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, namespace: str
) -> None:
    await serve_agent(EchoAgent())
    gateway = await start_gateway(default_agent="echo")
    labels = {"namespace": namespace, "component": gateway.settings.id}
    response = await http.post(f"{gateway.public_url}/a2a", content=b"{}", headers={"Content-Type": "text/html"})
    assert response.status_code == 415
    samples = await scrape(http, gateway.public_url)
    counted = {
        dict(labelled)["reason"]: count
        for (name, labelled), count in samples.items()
        if name == "mesh_bad_inputs_total" and labels.items() <= dict(labelled).items()
    }
    assert counted == {"UnsupportedMediaType": 1}
