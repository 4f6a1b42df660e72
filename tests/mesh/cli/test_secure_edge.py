"""The HTTP edge of the secured default ``mesh up`` (issue 23): an API key, shown once and kept
0600 in the state dir, asked of every caller; an anonymous caller gets 401 (so no user token is
ever minted for one); the cards the gateway serves are signed with its key and describe the key
scheme. ``mesh up --insecure`` keeps the open edge."""

from __future__ import annotations

import base64
import json
import re
import stat
from pathlib import Path

import httpx
import pytest
from joserfc import jwk, jws

from mesh.brokertools.localbroker import free_port
from mesh.brokertools.upstate import running_up
from mesh.cli.up_edge import api_key_file
from mesh.trust.cards import canonical_card
from mesh.trust.keys import ALGORITHMS
from tests.mesh.cli.test_secure import needs_mosquitto
from tests.mesh.cli_process import Service, start_mesh

SEND = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "message/send",
    "params": {"message": {"role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "hi"}]}},
}


async def _up(namespace: str, tmp_path: Path, http_port: int, *args: str) -> Service:
    up = await start_mesh(
        "up", *args, "--namespace", namespace, MESH_HTTP_PORT=str(http_port), MESH_STATE_DIR=str(tmp_path)
    )
    await up.wait_for_line("mesh up: ready", stream="stdout", timeout=60)
    return up


@needs_mosquitto
async def test_the_secured_edge_asks_for_its_api_key_and_serves_signed_cards(namespace: str, tmp_path: Path) -> None:
    http_port = free_port()
    base = f"http://127.0.0.1:{http_port}"
    broker = f"mqtt://localhost:{free_port()}"
    up = await _up(namespace, tmp_path, http_port, "--broker", broker)
    try:
        path = api_key_file(namespace, tmp_path)
        key = path.read_text().strip()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        shown = [line.rstrip("\n") for line in up.stdout_lines if line.strip().startswith("api key")]
        assert shown == [f"  api key    {key}  (new: shown this once; kept 0600 in {path})"], up.output
        assert any(f'export MESH_API_KEY="$(cat {path})"' in line for line in up.stdout_lines), up.output
        record = running_up(namespace, tmp_path)
        assert record is not None and record.api_key_file == str(path) and record.keys is not None
        assert key not in (Path(record.keys).parent / "dynamic-security.json").read_text()

        async with httpx.AsyncClient(timeout=30) as http:
            # Anonymous, or with a wrong key: 401, saying how to authenticate; nothing reaches the mesh.
            for headers in ({}, {"X-API-Key": "wrong"}, {"Authorization": "Bearer wrong"}):
                refused = await http.post(f"{base}/a2a/agents/echo", json=SEND, headers=headers)
                assert refused.status_code == 401, (headers, refused.text)
                assert refused.headers["WWW-Authenticate"].startswith("ApiKey"), refused.headers
                assert (await http.get(f"{base}/a2a/agents", headers=headers)).status_code == 401
            # The key, as X-API-Key or as a bearer token.
            for headers in ({"X-API-Key": key}, {"Authorization": f"Bearer {key}"}):
                answer = await http.post(f"{base}/a2a/agents/echo", json=SEND, headers=headers)
                assert answer.status_code == 200, answer.text
                assert answer.json()["result"]["status"]["state"] == "completed", answer.text

            # The card (public) names the scheme and is signed by the gateway's key.
            card = (await http.get(f"{base}/a2a/agents/echo/card")).json()
        assert card["securitySchemes"]["gateway"]["apiKeySecurityScheme"]["name"] == "X-API-Key", card
        assert card["securityRequirements"] == [{"schemes": {"gateway": {"list": []}}}], card
        assert key not in json.dumps(card)
        [signature] = card["signatures"]
        header = json.loads(base64.urlsafe_b64decode(signature["protected"] + "=="))
        assert header["kid"] == "http", header
        public = json.loads((Path(record.keys) / "jwks.json").read_text())
        gateway_key = jwk.KeySet.import_key_set(public).get_by_kid("http")
        compact = f"{signature['protected']}..{signature['signature']}"
        jws.deserialize_compact(compact, gateway_key, algorithms=ALGORITHMS, payload=canonical_card(card))
        tampered = {**card, "name": "evil"}
        with pytest.raises(Exception, match=r"(?i)signature"):
            jws.deserialize_compact(compact, gateway_key, algorithms=ALGORITHMS, payload=canonical_card(tampered))
    finally:
        assert await up.stop() == 0, up.output

    # Started again: the same key, kept, and not shown again.
    again = await _up(namespace, tmp_path, http_port, "--broker", broker)
    try:
        assert [line.strip() for line in again.stdout_lines if line.strip().startswith("api key")] == [
            f"api key    kept 0600 in {path}"
        ], again.output
        assert key not in again.output
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.post(f"{base}/a2a/agents/echo", json=SEND, headers={"X-API-Key": key})
            assert answer.status_code == 200, answer.text
    finally:
        assert await again.stop() == 0, again.output


async def test_mesh_up_insecure_keeps_the_open_edge(broker_url: str, namespace: str, tmp_path: Path) -> None:
    http_port = free_port()
    up = await _up(namespace, tmp_path, http_port, "--insecure", "--broker", broker_url)
    try:
        assert not any(re.search(r"api key|MESH_API_KEY", line) for line in up.stdout_lines), up.output
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.post(f"http://127.0.0.1:{http_port}/a2a/agents/echo", json=SEND)
            assert answer.status_code == 200, answer.text
            card = (await http.get(f"http://127.0.0.1:{http_port}/a2a/agents/echo/card")).json()
        assert not {"security", "securityRequirements", "signatures"} & set(card)
        assert not api_key_file(namespace, tmp_path).exists()
    finally:
        assert await up.stop() == 0, up.output
