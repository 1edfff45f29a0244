"""The manager contract at revision 22 (``vectors/manager-contract-rev22.json``): every digest in
the file is the one §13.7 computes (RFC 8785, SHA-256, a closure over ``{v:1, root, members:[]}``),
and the file differs from revision 21 (``vectors/manager-contract.json``) in exactly what the
0.69.0 release notes name: ``spawn.shareTools`` is a list of server names, not the flag text."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from meshview.wire.canonical import VOID_SCHEMA, canonical_bytes, closure_digest, digest, manifest_for

HERE = Path(__file__).resolve().parents[1] / "vectors"
REV22 = json.loads((HERE / "manager-contract-rev22.json").read_text(encoding="utf-8"))
REV21 = json.loads((HERE / "manager-contract.json").read_text(encoding="utf-8"))


def _by_name(doc: dict) -> dict[str, dict]:
    return {c["name"]: c for c in doc["commands"]}


def _schemas(doc: dict) -> dict[str, dict]:
    """Every named schema root of the file: the shared ones and each command's two sides."""
    out = dict(doc["sharedSchemas"])
    for c in doc["commands"]:
        out.setdefault(c["inputSchemaName"], c["inputSchema"])
        out.setdefault(c["outputSchemaName"], c["outputSchema"])
    return out


def test_revision_22_is_declared_everywhere_the_file_names_one():
    assert REV22["source"]["revision"] == 22
    assert REV22["clusterDocument"]["document"]["revision"] == 22
    assert REV22["commandCount"] == len(REV22["commands"]) == 32


@pytest.mark.parametrize("name", [c["name"] for c in REV22["commands"]])
def test_each_command_digest_is_the_closure_of_its_schema(name):
    c = _by_name(REV22)[name]
    assert c["inputDigest"] == closure_digest(c["inputSchema"])
    assert c["outputDigest"] == closure_digest(c["outputSchema"])


def test_the_cluster_document_hashes_to_its_digests_and_lists_every_command():
    cd = REV22["clusterDocument"]
    doc = cd["document"]
    assert cd["rootDigest"] == digest(doc)
    assert cd["manifest"] == manifest_for(cd["rootDigest"])
    assert cd["closureDigest"] == digest(cd["manifest"]) == closure_digest(doc)
    rows = {r["name"]: r for r in doc["commands"]}
    assert list(rows) == [c["name"] for c in REV22["commands"]]
    for name, c in _by_name(REV22).items():
        assert (rows[name]["inputDigest"], rows[name]["outputDigest"]) == (c["inputDigest"], c["outputDigest"])
        assert rows[name]["capability"] == c["capability"] and rows[name]["targeted"] == c["targeted"]
    # the registry's example spec registers the closure digest a describe names
    assert REV22["registry"]["spec"]["example"]["clusterDigests"] == [cd["closureDigest"]]


def test_the_epc_artifacts_are_every_distinct_schema_root_with_its_closure():
    schemas = _schemas(REV22)
    roots = {digest(c[side]) for c in REV22["commands"] for side in ("inputSchema", "outputSchema")}
    assert len(REV22["epcArtifacts"]) == REV22["distinctSchemaRoots"] == len(roots)
    for a in REV22["epcArtifacts"]:
        s = schemas[a["schemaName"]]
        assert (a["rootDigest"], a["closureDigest"]) == (digest(s), closure_digest(s)), a["schemaName"]
    assert {a["rootDigest"] for a in REV22["epcArtifacts"]} == roots


def test_the_computed_digest_vectors_recompute():
    got = {v["name"]: v["value"] for v in REV22["testVectors"]["computedDigests"]}
    assert got["void schema artifact digest"] == digest(VOID_SCHEMA)
    assert got["void schema closure digest (op digest of every void side)"] == closure_digest(VOID_SCHEMA)
    assert got["cluster document root digest (rev 22)"] == REV22["clusterDocument"]["rootDigest"]
    assert got["cluster closure digest (rev 22, the svc spec clusterDigests entry)"] == \
        REV22["clusterDocument"]["closureDigest"]
    for case in REV22["testVectors"]["canonicalization"]:
        if "input" in case and "canonical" in case:
            assert canonical_bytes(case["input"]).decode("utf-8") == case["canonical"], case["name"]


def test_rev_22_differs_from_rev_21_only_in_spawn_share_tools():
    r21, r22 = _by_name(REV21), _by_name(REV22)
    assert list(r21) == list(r22)
    for name in r21:
        a, b = r21[name], r22[name]
        if name == "spawn":
            assert a["outputSchema"] == b["outputSchema"] and a["outputDigest"] == b["outputDigest"]
            pa, pb = dict(a["inputSchema"]["properties"]), dict(b["inputSchema"]["properties"])
            assert pa.pop("shareTools") == {"type": "string"}
            assert pb.pop("shareTools") == {"type": "array", "items": {"type": "string"}}
            assert pa == pb and a["inputDigest"] != b["inputDigest"]
            continue
        assert a == b, name  # schemas, digests, modes, capability: unchanged
    assert REV21["spawnInputKeys"] == REV22["spawnInputKeys"]
    assert REV22["sharedSchemas"]["SPAWN_INPUT_SCHEMA"] == r22["spawn"]["inputSchema"]
    assert REV21["clusterDocument"]["closureDigest"] != REV22["clusterDocument"]["closureDigest"]


def test_share_tools_is_a_list_at_22_and_the_flag_text_at_21():
    s21, s22 = _by_name(REV21)["spawn"]["inputSchema"], _by_name(REV22)["spawn"]["inputSchema"]
    for ok in ({"name": "w", "shareTools": ["tavily", "figma"]}, {"name": "w", "shareTools": []},
               {"name": "w", "shareTools": ["none", "a,b"]}):  # any name a list can carry
        jsonschema.validate(ok, s22)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(ok, s21)
    jsonschema.validate({"name": "w", "shareTools": "tavily,figma"}, s21)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "w", "shareTools": "tavily,figma"}, s22)
