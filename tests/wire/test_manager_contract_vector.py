"""The reference manager's service contract as data (``vectors/manager-contract.json``, revision
21): the file is whole, the verbs the CLI issues are commands of the contract, and the spawn
input schema is closed — the shapes our demo manager and client must pass."""

from __future__ import annotations

import jsonschema
import pytest

from conftest import load_vectors

CONTRACT = load_vectors("manager-contract.json")
COMMANDS = {c["name"]: c for c in CONTRACT["commands"]}


def test_the_contract_file_is_whole():
    assert CONTRACT["commandCount"] == len(CONTRACT["commands"]) == len(COMMANDS)
    for c in CONTRACT["commands"]:
        assert c["inputDigest"].startswith("sha256:") and c["outputDigest"].startswith("sha256:")
        assert isinstance(c["inputSchema"], dict) and isinstance(c["outputSchema"], dict)


@pytest.mark.parametrize("verb", ["ps", "status", "spawn", "stop", "input", "attach", "purge"])
def test_every_control_verb_the_cli_issues_is_a_contract_command(verb):
    assert verb in COMMANDS


def test_spawn_input_is_closed_and_names_exactly_the_published_keys():
    schema = COMMANDS["spawn"]["inputSchema"]
    assert schema.get("additionalProperties") is False
    assert sorted(schema["properties"]) == sorted(CONTRACT["spawnInputKeys"])
    jsonschema.validate({"name": "seat-1", "agent": "claude-code"}, schema)
    with pytest.raises(jsonschema.ValidationError):  # personas are manager-side, not a field
        jsonschema.validate({"name": "seat-1", "persona": "reviewer"}, schema)
