"""Mutation testing of the compliance harness with cosmic-ray.

``python -m tests.mutation.run [TARGET ...]`` (or ``tests/mutation/run.sh``)
copies the tree to a scratch directory, has cosmic-ray mutate one target driver
there (the driver code only: ``scope.py``), and runs the harness on every
mutant (``python -m tests.mutation.harness TARGET``, with a per-mutant timeout).
A mutant is *killed* when a must check fails or errors, the run crashes or it
times out; it *survives* when the harness certifies it. The checkout itself is
never mutated, and the scratch copy is removed however the run ends.

It prints the score and a table of the survivors, each with its classification
from ``survivors.toml`` (equivalent, or a gap in the harness), and writes a
summary per target to ``--out`` (``test-results/mutation``); ``--doc FILE``
rewrites the generated part of that file (docs/mutation.md) from the summaries.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from driver_kit.tables import format_columns
from tests.mutation.scope import Scope
from tests.mutation.targets import TARGETS, Target

ROOT = Path(__file__).resolve().parents[2]
CLASSIFICATION = Path(__file__).with_name("survivors.toml")
#: operators left out: none by default (each is a realistic one-token bug)
EXCLUDED_OPERATORS: tuple[str, ...] = ()
#: what the copy of the tree leaves out
_NOT_COPIED = (".git", ".venv", "test-results", "__pycache__", "*.egg-info", ".pytest_cache",
               ".hypothesis", "mutants", "build", "dist")
#: a mutant's harness run that takes longer than this many times the unmutated run (at
#: least MIN_TIMEOUT_S) is killed: a hang, not a slow machine (the load of a shared
#: 2-core machine made the unmutated run vary up to 3x)
TIMEOUT_FACTOR, MIN_TIMEOUT_S = 8.0, 20.0
#: the block of docs/mutation.md a run rewrites: <!-- mutation-results:LABEL:begin --> ...
MARKER = "<!-- mutation-results:{label}:{end} -->"


@dataclass(frozen=True, slots=True)
class Mutant:
    """One mutant cosmic-ray ran (or skipped), with what the harness made of it."""

    target: str
    path: str
    line: int
    definition: str
    operator: str
    occurrence: int
    #: killed, survived, incompetent (cosmic-ray could not run it), invalid (not valid
    #: Python: not run), skipped (out of scope or not selected), pending (not run yet)
    outcome: str
    #: the changed lines, "-old" / "+new"
    change: str
    #: the must checks that failed or errored, "timeout", or what crashed the run
    killed_by: str
    #: how long the harness took on this mutant (None: timed out or crashed)
    harness_s: float | None


@dataclass(frozen=True, slots=True)
class Classification:
    """What a survivor is: ``equivalent`` (no driver user could tell), or a ``gap`` in the
    harness (the note names the check that would kill it)."""

    verdict: str
    note: str


@dataclass(frozen=True, slots=True)
class Rule:
    """One entry of survivors.toml: the survivors it matches and their classification.

    A survivor matches when, for each field given, it is of ``target``, its
    ``definition`` (function or method) is that name, its operator matches the
    ``operator`` regex, its original line contains ``line`` and its mutated line
    contains ``to``.
    """

    classification: Classification
    target: str | None = None
    definition: str | None = None
    operator: str | None = None
    line: str | None = None
    to: str | None = None

    def matches(self, mutant: Mutant) -> bool:
        lines = mutant.change.splitlines()
        original = next((c[1:] for c in lines if c.startswith("-")), "")
        mutated = next((c[1:] for c in lines if c.startswith("+")), "")
        return (self.target in (None, mutant.target)
                and self.definition in (None, mutant.definition)
                and (self.operator is None or re.search(self.operator, mutant.operator))
                and (self.line is None or self.line in original)
                and (self.to is None or self.to in mutated))


def _cosmic_ray(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``cosmic-ray ARGS`` (its documented command line) in the copy ``cwd``.

    Temporary files go under the scratch directory beside the copy, so that what a
    killed harness run leaves there goes with the copy."""
    env = {**os.environ, "TMPDIR": str(cwd.parent)}
    return subprocess.run([sys.executable, "-m", "cosmic_ray.cli", *args], cwd=cwd, env=env,
                          check=check, capture_output=True, text=True)


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string of printable text is a TOML basic string


def write_config(target: Target, copy: Path, timeout_s: float) -> Path:
    """cosmic-ray's configuration for ``target`` in the copy ``copy``."""
    test = shlex.join([sys.executable, "-m", "tests.mutation.harness", target.name])
    config = copy / f"mutation-{target.name}.toml"
    config.write_text("\n".join([
        "[cosmic-ray]",
        f"module-path = {_toml_str(target.path)}",
        f"timeout = {float(timeout_s)}",
        "excluded-modules = []",
        f"test-command = {_toml_str(test)}",
        "",
        "[cosmic-ray.distributor]",
        'name = "local"',
        ""]), encoding="utf-8")
    return config


#: why a mutant was not run, as recorded in the session
OUT_OF_SCOPE, INVALID, NOT_SELECTED = "not driver code", "not valid Python", "not selected"


def _skip(session: Path, reason: Callable[[Any], str | None]) -> None:
    """Mark skipped every pending mutant for which ``reason(item)`` gives a reason
    (cosmic-ray's filter API, as its own filters use it)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(session), WorkDB.Mode.open) as db:
        skipped: dict[str, list[str]] = {}
        for item in db.pending_work_items:
            why = reason(item)
            if why:
                skipped.setdefault(why, []).append(item.job_id)
        for why, ids in skipped.items():
            db.set_multiple_results(ids, WorkResult(output=why,
                                                    worker_outcome=WorkerOutcome.SKIPPED))


def _out_of_scope(source: str, excluded: Iterable[str]) -> Callable[[Any], str | None]:
    """A ``_skip`` reason: the mutant is outside the driver code or an excluded operator."""
    scope = Scope(source)
    pattern = re.compile("|".join(f"(?:{e})" for e in excluded) or "(?!)")

    def reason(item: Any) -> str | None:
        [spec] = item.mutations
        inside = scope.contains(spec.start_pos, spec.end_pos)
        return None if inside and not pattern.search(spec.operator_name) else OUT_OF_SCOPE
    return reason


def _invalid(source: str) -> Callable[[Any], str | None]:
    """A ``_skip`` reason: the mutant is not valid Python (it would only fail to import)."""
    import cosmic_ray.plugins
    from cosmic_ray.mutating import mutate_code

    def reason(item: Any) -> str | None:
        [spec] = item.mutations
        operator = cosmic_ray.plugins.get_operator(spec.operator_name)(**spec.operator_args)
        try:
            compile(mutate_code(source, operator, spec.occurrence) or "", "mutant", "exec")
        except SyntaxError:
            return INVALID
        return None
    return reason


def _pending(session: Path) -> list[Any]:
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(session), WorkDB.Mode.open) as db:
        return sorted(db.pending_work_items, key=lambda item: item.job_id)


def _copy_tree(into: Path) -> Path:
    copy = into / "tree"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(*_NOT_COPIED), symlinks=True)
    # compiled once here, as cosmic-ray's runs write no bytecode (so each mutant would
    # compile the whole tree again); the mutated file is compiled afresh by every run
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-x", r"[/\\]\.", str(copy)],
                   check=True, capture_output=True)
    return copy


def _change(diff: str | None) -> str:
    lines = [line for line in (diff or "").splitlines()
             if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    return "\n".join(f"{line[0]}{line[1:].strip()}" for line in lines)


_VERDICT = re.compile(r"^harness: \d+ must checks failed or errored \((.*)\) in ([\d.]+) s$",
                      re.M)


def _verdict(output: str) -> tuple[str, float | None]:
    """(the checks that failed, the harness's time) from the harness's output."""
    found = _VERDICT.search(output)
    if found:
        return found[1], float(found[2])
    if output.strip() == "timeout":
        return "timeout", None
    lines = output.strip().splitlines()
    return f"crash: {lines[-1] if lines else 'no output'}", None


def read_session(target: Target, session: Path) -> list[Mutant]:
    """Every mutant of the session (cosmic-ray's WorkDB, as ``cosmic-ray dump`` reads it)."""
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(session), WorkDB.Mode.open) as db:
        items = list(db.completed_work_items) + [(i, None) for i in db.pending_work_items]
    mutants = []
    for item, result in items:
        # one mutation per mutant; none in the baseline run
        spec = item.mutations[0] if item.mutations else None
        if result is None:
            outcome = "pending"
        elif result.worker_outcome == "skipped":
            outcome = "invalid" if result.output == INVALID else "skipped"
        else:
            outcome = result.test_outcome.value if result.test_outcome else "incompetent"
        killed_by, harness_s = _verdict(result.output or "") if result else ("", None)
        mutants.append(Mutant(
            target=target.name, path=str(spec.module_path) if spec else target.path,
            line=spec.start_pos[0] if spec else 0,
            definition=(spec.definition_name or "") if spec else "",
            operator=spec.operator_name if spec else "", occurrence=spec.occurrence if spec else 0,
            outcome=outcome, change=_change(result.diff if result else None),
            killed_by=killed_by if outcome == "killed" else "", harness_s=harness_s))
    return sorted(mutants, key=lambda m: (m.line, m.operator, m.occurrence))


def load_classification(path: Path = CLASSIFICATION) -> list[Rule]:
    """The rules of survivors.toml, in their order (the first that matches applies)."""
    if not path.exists():
        return []
    entries = tomllib.loads(path.read_text(encoding="utf-8")).get("survivor", [])
    return [Rule(target=e.get("target"), classification=Classification(e["verdict"], e["note"]),
                 definition=e.get("definition"), operator=e.get("operator"),
                 line=e.get("line"), to=e.get("to")) for e in entries]


def classify(mutant: Mutant, rules: list[Rule]) -> Classification:
    return next((r.classification for r in rules if r.matches(mutant)),
                Classification("unclassified", "not yet looked at"))


def score(mutants: list[Mutant]) -> dict[str, Any]:
    """Counts by outcome and the score: killed / (killed + survived)."""
    counts = {k: sum(m.outcome == k for m in mutants)
              for k in ("killed", "survived", "incompetent", "invalid", "skipped")}
    ran = counts["killed"] + counts["survived"]
    return {**counts, "score_pct": round(100.0 * counts["killed"] / ran, 1) if ran else None}


def _execute(target: Target, config: Path, session: Path, copy: Path, source: str,
             log: Callable[[str], None], attempts: int = 3) -> None:
    """``cosmic-ray exec`` until no mutant is pending. A signal from outside can stop
    it half-way, leaving the mutant it was running in the copy: the file is put
    back and the session resumed (the mutant it was running is run again)."""
    for _ in range(attempts):
        run = _cosmic_ray("exec", str(config), str(session), cwd=copy, check=False)
        left = len(_pending(session))
        if not left:
            return
        (copy / target.path).write_text(source, encoding="utf-8")
        log(f"{target.name}: cosmic-ray exec stopped (exit {run.returncode}) with {left} "
            f"mutants left: resuming")
    raise RuntimeError(f"{target.name}: cosmic-ray exec stopped {attempts} times; the "
                       f"session {session} holds the results so far")


def run_target(target: Target, *, out: Path, timeout_s: float | None = None,
               excluded: Iterable[str] = EXCLUDED_OPERATORS,
               keep: Callable[[str, str], bool] | None = None, sample: int | None = None,
               seed: int = 0, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Mutate ``target`` in a copy of the tree, run the harness on every mutant, and
    return the summary (also written to ``out/<target>.json``).

    ``timeout_s`` bounds each mutant's run (default: TIMEOUT_FACTOR times the
    unmutated run). ``keep(operator, line)`` selects mutants by operator name and
    the stripped source line mutated; ``sample`` runs that many mutants drawn
    with ``seed``.
    """
    original = hashlib.sha256((ROOT / target.path).read_bytes()).hexdigest()
    out.mkdir(parents=True, exist_ok=True)
    session = (out / f"{target.name}.sqlite").resolve()
    with tempfile.TemporaryDirectory(prefix=f"mutation-{target.name}-") as scratch:
        copy = _copy_tree(Path(scratch))
        mutated = copy / target.path
        for stale in mutated.parent.glob(f"__pycache__/{mutated.stem}.*.pyc"):
            stale.unlink()  # a mutant written within the second could look up to date
        config = write_config(target, copy, timeout_s or 600.0)
        _cosmic_ray("init", str(config), str(session), "--force", cwd=copy)
        source = mutated.read_text(encoding="utf-8")
        _skip(session, _out_of_scope(source, excluded))
        _skip(session, _invalid(source))
        if keep is not None:
            lines = source.splitlines()

            def unselected(item: Any) -> str | None:
                [spec] = item.mutations
                chosen = keep(spec.operator_name, lines[spec.start_pos[0] - 1].strip())
                return None if chosen else NOT_SELECTED
            _skip(session, unselected)
        if sample is not None:
            pending = _pending(session)
            chosen = {i.job_id for i in random.Random(seed).sample(
                pending, min(sample, len(pending)))}
            _skip(session, lambda item: None if item.job_id in chosen else NOT_SELECTED)
        baseline = Path(scratch) / "baseline.sqlite"
        run = _cosmic_ray("baseline", str(config), "--session-file",
                          str(baseline), cwd=copy, check=False)
        if run.returncode != 0:
            raise RuntimeError(f"{target.name}: the harness fails the unmutated driver, so "
                               f"no mutant can be judged:\n{run.stderr[-2000:]}")
        [unmutated] = read_session(target, baseline)
        timeout_s = timeout_s or max(MIN_TIMEOUT_S, TIMEOUT_FACTOR * unmutated.harness_s)
        write_config(target, copy, timeout_s)
        log(f"{target.name}: the harness passes the unmutated driver in "
            f"{unmutated.harness_s} s; running {len(_pending(session))} mutants, "
            f"{timeout_s:.0f} s each at most")
        start = time.monotonic()
        _execute(target, config, session, copy, source, log)
        exec_s = time.monotonic() - start
        mutants = read_session(target, session)
    if hashlib.sha256((ROOT / target.path).read_bytes()).hexdigest() != original:
        raise RuntimeError(f"{target.path} changed during the run: restore it from git")
    ran = [m for m in mutants if m.outcome in ("killed", "survived", "incompetent")]
    timed = sorted(m.harness_s for m in ran if m.harness_s is not None)
    summary = {"target": target.name, "path": target.path, **score(mutants),
               "ran": len(ran), "baseline_s": unmutated.harness_s,
               "exec_s": round(exec_s, 1),
               "per_mutant_s": round(exec_s / len(ran), 2) if ran else None,
               "harness_median_s": timed[len(timed) // 2] if timed else None,
               "harness_max_s": timed[-1] if timed else None,
               "timeouts": sum(m.killed_by == "timeout" for m in ran),
               "timeout_s": round(timeout_s, 1), "excluded_operators": list(excluded),
               "sampled": sample, "mutants": [asdict(m) for m in ran]}
    (out / f"{target.name}.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return summary


# ---------------------------------------------------------------- reporting

def _survivors(summaries: list[dict[str, Any]]) -> list[tuple[Mutant, Classification]]:
    known = load_classification()
    return [(m, classify(m, known)) for s in summaries
            for m in (Mutant(**d) for d in s["mutants"]) if m.outcome == "survived"]


def score_table(summaries: list[dict[str, Any]]) -> str:
    rows = [(s["target"], s["path"], s["ran"], s["killed"], s["survived"], s["incompetent"],
             s["invalid"], f"{s['score_pct']}%", s["baseline_s"], s["harness_median_s"],
             s["timeouts"], s["per_mutant_s"], f"{s['exec_s'] / 60:.1f}") for s in summaries]
    return format_columns(rows, ("target", "file", "ran", "killed", "survived", "incompetent",
                                 "invalid", "score", "harness s", "median s", "timeouts",
                                 "s/mutant", "run min"))


def survivor_table(summaries: list[dict[str, Any]]) -> str:
    rows = [(f"{m.path}:{m.line}", m.operator.removeprefix("core/"),
             m.change.replace("\n", "  "), c.verdict) for m, c in _survivors(summaries)]
    return format_columns(rows, ("where", "operator", "change", "verdict"))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def markdown(summaries: list[dict[str, Any]]) -> str:
    """The generated part of docs/mutation.md."""
    lines = ["| target | file | mutants run | killed | survived | incompetent | not valid "
             "Python (not run) | score | harness on the driver (s) | median on a mutant (s) | "
             "timeouts (limit) | s per mutant | whole run (min) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        lines.append(f"| {s['target']} | `{s['path']}` | {s['ran']} | {s['killed']} | "
                     f"{s['survived']} | {s['incompetent']} | {s['invalid']} | "
                     f"**{s['score_pct']}%** | {s['baseline_s']} | {s['harness_median_s']} | "
                     f"{s['timeouts']} ({s['timeout_s']:g} s) | {s['per_mutant_s']} | "
                     f"{s['exec_s'] / 60:.1f} |")
    groups: dict[tuple[str, str, str], list[Mutant]] = {}
    for m, c in _survivors(summaries):
        groups.setdefault((m.target, c.verdict, c.note), []).append(m)
    lines += ["", "Survivors by classification:", "",
              "| target | verdict | why / the check that kills it | mutants | lines |",
              "|---|---|---|---|---|"]
    for (target, verdict, note), group in groups.items():
        where = ", ".join(sorted({str(m.line) for m in group}, key=int))
        lines.append(f"| {target} | {verdict} | {_cell(note)} | {len(group)} | {where} |")
    lines += ["", "Every surviving mutant:", "",
              "| where | in | operator | change | verdict | why / the check that kills it |",
              "|---|---|---|---|---|---|"]
    for m, c in _survivors(summaries):
        lines.append(f"| `{m.path}:{m.line}` | `{m.definition}` | "
                     f"{m.operator.removeprefix('core/')} | <code>{_cell(m.change)}</code> | "
                     f"{c.verdict} | {_cell(c.note)} |")
    return "\n".join(lines)


def write_doc(doc: Path, summaries: list[dict[str, Any]], label: str) -> None:
    """Replace the text between the ``label`` result markers of ``doc`` with ``markdown()``."""
    begin, end = (MARKER.format(label=label, end=e) for e in ("begin", "end"))
    text = doc.read_text(encoding="utf-8")
    head, sep, rest = text.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not (sep and sep2):
        raise ValueError(f"{doc} has no {begin} ... {end} block to fill")
    doc.write_text(f"{head}{begin}\n{markdown(summaries)}\n{end}{tail}", encoding="utf-8")


def _terminate(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds, so the scratch copy is removed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tests/mutation/run.sh",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", choices=[[], *sorted(TARGETS)],
                        metavar="TARGET", help=f"one of {', '.join(sorted(TARGETS))} (all)")
    parser.add_argument("--timeout", type=float, metavar="S",
                        help=f"seconds one mutant's harness run may take (default "
                             f"{TIMEOUT_FACTOR:g} x the unmutated run, at least "
                             f"{MIN_TIMEOUT_S:g})")
    parser.add_argument("--exclude-operator", action="append", default=None,
                        metavar="REGEX", help="leave out operators matching REGEX")
    parser.add_argument("--sample", type=int, metavar="N",
                        help="run N mutants drawn at random (seeded) per target")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "test-results" / "mutation")
    parser.add_argument("--doc", type=Path, help="rewrite a results block of this file")
    parser.add_argument("--label", default="latest",
                        help="which results block of --doc (mutation-results:LABEL; latest)")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: print (and --doc) the summaries in --out")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    names = args.targets or sorted(TARGETS)
    if not args.report_only:
        for name in names:
            run_target(TARGETS[name], out=args.out, timeout_s=args.timeout,
                       excluded=tuple(args.exclude_operator or EXCLUDED_OPERATORS),
                       sample=args.sample, seed=args.seed)
    summaries = [json.loads((args.out / f"{n}.json").read_text(encoding="utf-8"))
                 for n in names if (args.out / f"{n}.json").exists()]
    print(score_table(summaries))
    print(survivor_table(summaries))
    if args.doc:
        write_doc(args.doc, summaries, args.label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
