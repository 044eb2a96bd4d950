"""The checked-in protobuf code is current, and every service has the RPCs the gateway calls.

`make protos` (protos/generate.py) is the only writer of protos/gen/python. These tests regenerate
into a temporary directory and compare byte for byte, so a .proto edited without regenerating, or
generated code edited by hand, fails here.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from google.protobuf import descriptor_pb2

ROOT = Path(__file__).resolve().parents[1]
PROTOS_DIR = ROOT / "protos"
GEN_DIR = PROTOS_DIR / "gen" / "python"

if str(GEN_DIR) not in sys.path:
    sys.path.insert(0, str(GEN_DIR))

EXPECTED_RPCS: dict[str, tuple[str, set[str]]] = {
    "IngestService": (
        "ingest",
        {
            "ListFormats",
            "ImportTraces",
            "IngestOtlpSpans",
            "ListTraces",
            "GetTrace",
            "BatchGetTraces",
            "DeleteTrace",
            "ListTraceSources",
            "RenameTraceSource",
            "CreateAnnotation",
            "UpdateAnnotation",
            "DeleteAnnotation",
            "ExportTraces",
            "ExportAnnotations",
            "ListTraceRevisions",
            "GetTraceRevision",
            "BatchGetTraceRevisions",
            "StreamOwnerRows",
            "GetOwnerVersion",
            "UploadTranscript",
            "PutReviewGrant",
            "ListReviewGrants",
            "DeleteReviewGrant",
            "AuthorizeTrace",
        },
    ),
    "LabelerService": (
        "labeler",
        {
            "AnnounceTraceRevision",
            "AnnounceTraceRevisions",
            "RelabelTrace",
            "GetTraceEvaluation",
            "BatchGetEvaluationSummaries",
            "ListProcessPatterns",
            "RecordTrajectoryEvents",
            "GetCourseCorrection",
            "GetTraceCompletion",
            "GetTraceSections",
            "SummarizeSections",
            "StreamOwnerRows",
            "GetOwnerVersion",
        },
    ),
    "TrainerService": (
        "trainer",
        {
            "CreateRewardModel",
            "ListRewardModels",
            "GetRewardModel",
            "RetryRewardModel",
            "DeleteRewardModel",
            "GetWeightsUrl",
            "ExportPairs",
            "ReportJobProgress",
            "CompleteJob",
        },
    ),
    "ScorerService": (
        "scorer",
        {
            "ScoreTrace",
            "ListTraceScores",
            "ListActionScores",
            "ListScoringRuns",
            "GetScoringRun",
            "BatchGetLatestScores",
            "ReportScoringResult",
            "PublishTrainingScores",
            "ForgetRewardModel",
            "PublishEvaluatorRelease",
            "GetEvaluatorScores",
            "BatchGetEvaluatorScores",
            "StreamOwnerRows",
            "GetOwnerVersion",
        },
    ),
    "GepaService": (
        "gepa",
        {
            "CreateGepaRun",
            "ListGepaRuns",
            "GetGepaRun",
            "GetSkill",
            "RetryGepaRun",
            "DeleteGepaRun",
            "GetGepaDefaults",
            "ReportGepaProgress",
            "CompleteGepaJob",
        },
    ),
    "EvaluatorService": (
        "evaluator",
        {
            "GrantConsent",
            "RevokeConsent",
            "GetConsent",
            "ListReviewQueue",
            "RecordReview",
            "NameReviewer",
            "RemoveReviewer",
            "SetReviewPolicy",
            "GetEvaluatorStats",
            "CollectCorpus",
            "FreezeBenchmark",
            "ListBenchmarks",
            "TakeSnapshot",
            "ListOperatorActions",
            "SetTrainingPolicy",
            "GetTrainingPolicy",
            "TrainCandidate",
            "ListCandidates",
            "ApproveCandidate",
            "RollbackRelease",
            "ListReleases",
        },
    ),
}

SERVER_STREAMING = {"ExportTraces", "ExportAnnotations", "ExportPairs", "StreamOwnerRows"}


def load_generator() -> ModuleType:
    """protos/generate.py as a module (protos/ is not a package)."""
    spec = importlib.util.spec_from_file_location("stash_protos_generate", PROTOS_DIR / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def relative_files(root: Path) -> set[str]:
    """Every file under root, as POSIX paths relative to it, skipping bytecode caches."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_checked_in_code_matches_a_fresh_generation(tmp_path: Path) -> None:
    generator = load_generator()
    generator.generate(tmp_path)

    fresh = relative_files(tmp_path)
    checked_in = relative_files(GEN_DIR)
    hint = "protos/gen/python is stale: run `make protos` and commit the result."
    missing = sorted(fresh - checked_in)
    extra = sorted(checked_in - fresh)
    assert not missing, f"{hint} Missing from protos/gen/python: {missing}"
    assert not extra, f"{hint} Not produced by the generator (delete them or add their .proto): {extra}"
    differing = sorted(name for name in fresh if (tmp_path / name).read_bytes() != (GEN_DIR / name).read_bytes())
    assert not differing, f"{hint} Out of date or edited by hand: {differing}"


def test_generation_is_deterministic(tmp_path: Path) -> None:
    generator = load_generator()
    first, second = tmp_path / "a", tmp_path / "b"
    generator.generate(first)
    generator.generate(second)
    names = relative_files(first)
    assert names == relative_files(second)
    assert all((first / n).read_bytes() == (second / n).read_bytes() for n in names)


def test_every_grpc_module_is_covered() -> None:
    modules = {p.name.removesuffix("_pb2_grpc.py") for p in (GEN_DIR / "stash/rm/v1").glob("*_pb2_grpc.py")}
    assert modules == {"common"} | {module for module, _ in EXPECTED_RPCS.values()}


@pytest.mark.parametrize("service", sorted(EXPECTED_RPCS))
def test_service_has_expected_rpcs(service: str) -> None:
    module_name, rpcs = EXPECTED_RPCS[service]
    pb2 = importlib.import_module(f"stash.rm.v1.{module_name}_pb2")
    pb2_grpc = importlib.import_module(f"stash.rm.v1.{module_name}_pb2_grpc")

    descriptor = pb2.DESCRIPTOR.services_by_name[service]
    assert descriptor.full_name == f"stash.rm.v1.{service}"
    assert {m.name for m in descriptor.methods} == rpcs
    for method in descriptor.methods:
        assert method.input_type.name == f"{method.name}Request"
        assert method.output_type.name == f"{method.name}Response"
        assert not method.client_streaming
        assert method.server_streaming == (method.name in SERVER_STREAMING), method.name

    assert hasattr(pb2_grpc, f"{service}Stub")
    assert hasattr(pb2_grpc, f"add_{service}Servicer_to_server")
    servicer = getattr(pb2_grpc, f"{service}Servicer")
    assert all(callable(getattr(servicer, rpc, None)) for rpc in rpcs)


def test_common_module_has_no_service() -> None:
    common_pb2 = importlib.import_module("stash.rm.v1.common_pb2")
    assert not common_pb2.DESCRIPTOR.services_by_name
    importlib.import_module("stash.rm.v1.common_pb2_grpc")


def _declarations(file_proto: descriptor_pb2.FileDescriptorProto) -> list[tuple[str, tuple[int, ...]]]:
    """(name, source-info path) of every service, RPC, message, field, oneof, enum and enum value."""
    found: list[tuple[str, tuple[int, ...]]] = []

    def enum(e: descriptor_pb2.EnumDescriptorProto, path: tuple[int, ...], prefix: str) -> None:
        found.append((f"{prefix}{e.name}", path))
        found.extend((f"{prefix}{e.name}.{v.name}", (*path, 2, i)) for i, v in enumerate(e.value))

    def message(m: descriptor_pb2.DescriptorProto, path: tuple[int, ...], prefix: str) -> None:
        name = f"{prefix}{m.name}"
        if m.options.map_entry:
            return
        found.append((name, path))
        found.extend((f"{name}.{f.name}", (*path, 2, i)) for i, f in enumerate(m.field))
        found.extend(
            (f"{name}.{o.name}", (*path, 8, i)) for i, o in enumerate(m.oneof_decl) if not o.name.startswith("_")
        )
        for i, nested in enumerate(m.nested_type):
            message(nested, (*path, 3, i), f"{name}.")
        for i, e in enumerate(m.enum_type):
            enum(e, (*path, 4, i), f"{name}.")

    for i, m in enumerate(file_proto.message_type):
        message(m, (4, i), "")
    for i, e in enumerate(file_proto.enum_type):
        enum(e, (5, i), "")
    for i, s in enumerate(file_proto.service):
        found.append((s.name, (6, i)))
        found.extend((f"{s.name}.{rpc.name}", (6, i, 2, j)) for j, rpc in enumerate(s.method))
    return found


def test_every_declaration_has_a_leading_comment(tmp_path: Path) -> None:
    """The buf COMMENTS rule of STYLE.md, checked without buf: every declaration has a `//` comment above it."""
    from grpc_tools import protoc

    generator = load_generator()
    bundled = Path(protoc.__file__).resolve().parent / "_proto"
    out = tmp_path / "descriptors.binpb"
    args = [
        "grpc_tools.protoc",
        f"--proto_path={PROTOS_DIR}",
        f"--proto_path={bundled}",
        "--include_source_info",
        f"--descriptor_set_out={out}",
        *(str(PROTOS_DIR / name) for name in generator.proto_files()),
    ]
    assert protoc.main(args) == 0
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    uncommented = []
    for file_proto in files:
        comments = {tuple(loc.path): loc.leading_comments.strip() for loc in file_proto.source_code_info.location}
        uncommented += [
            f"{file_proto.name}: {name}" for name, path in _declarations(file_proto) if not comments.get(path)
        ]
    assert not uncommented, "Give each of these a one-line `//` comment above it:\n" + "\n".join(uncommented)
