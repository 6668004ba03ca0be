"""Mutation testing of the decision code with cosmic-ray (`make mutation`, `make mutation MODULE=...`).

Runs in .venv-mutation (cosmic-ray only); each mutant's tests run in the program's .venv (``--python``).
Why a driver around cosmic-ray's own commands: a mutant must run only the tests that reach its file
(``[[tool.cosmic-ray.scope]]`` in pyproject.toml), two files at a time on 2 cores, each in its own copy
of the tree (cosmic-ray writes the mutant into the file it tests), with a stable sample, and the
argued equivalent mutants (tests/mutation/equivalent.txt) counted apart.

Per file: ``cosmic-ray init`` then ``exec`` (its public commands); the driver only marks work items
skipped (operator not in the set, not drawn in the sample) and reads the results, through
``cosmic_ray.work_db``. Output: build/mutation/report.md (the scores) and survivors.txt (each
surviving mutant's diff), and exit 1 if a module named in pyproject.toml scores under ``fail-under``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import fnmatch
import glob
import hashlib
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

ROOT = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["cosmic-ray"]


@dataclass
class Score:
    """One source file's outcome."""

    path: str
    total: int = 0  # mutants of the operator set in the file
    sampled: int = 0
    killed: int = 0
    survived: int = 0
    equivalent: int = 0
    note: str = ""
    survivors: list[str] = field(default_factory=list)

    @property
    def scored(self) -> int:
        return self.killed + self.survived


@dataclass(frozen=True)
class Equivalent:
    """One line of the equivalents file; ``*`` in path (a glob), column or nth matches any."""

    path: str
    operator: str
    column: str
    nth: str
    source: str
    reason: str

    def matches(self, key: tuple) -> bool:
        path, operator, source, column, nth = key
        return (fnmatch.fnmatch(path, self.path) and operator == self.operator and source == self.source
                and self.column in ("*", str(column)) and self.nth in ("*", str(nth)))


def equivalents() -> list[Equivalent]:
    """The argued equivalent mutants (file | operator | column | nth | source line | reason)."""
    table = []
    for number, line in enumerate((ROOT / CONFIG["equivalents"]).read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(" | ")]
        if len(parts) != 6:
            sys.exit(f"{CONFIG['equivalents']}:{number}: need 'file | operator | column | nth | source line | reason'")
        table.append(Equivalent(*parts))
    return table


def equivalent_reason(known: list[Equivalent], key: tuple) -> str | None:
    return next((e.reason for e in known if e.matches(key)), None)


def mutant_key(item, source_lines: list[str], seen: dict) -> tuple:
    """A mutant's name that survives edits elsewhere in the file: its line's text, not its number."""
    mutation = item.mutations[0]
    line_no, col = mutation.start_pos
    text = source_lines[line_no - 1]
    stripped = text.strip()
    col -= len(text) - len(text.lstrip())
    at = (str(mutation.module_path), mutation.operator_name, stripped, col)
    nth = seen.get(at, 0)
    seen[at] = nth + 1
    return at + (nth,)


def tests_for(path: str, tree: Path) -> list[str]:
    """The test files and folders that reach ``path`` (first matching scope)."""
    stem = Path(path).stem
    for scope in CONFIG["scope"]:
        if Path(path).match(scope["source"]):
            found = []
            for pattern in scope["tests"]:
                found += sorted(str(Path(p).relative_to(tree)) for p in glob.glob(str(tree / pattern.format(stem=stem))))
            return found
    return []


def copy_tree(dest: Path) -> None:
    """A fresh copy of the worktree's files (tracked and new, not ignored) for one worker."""
    if dest.exists():
        shutil.rmtree(dest)
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file() and not name.startswith(("build/", ".venv")):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


RUNNING: set[subprocess.Popen] = set()


def stop_children(signum: int, _frame) -> None:
    """On Ctrl-C or SIGTERM, end the cosmic-ray processes too (each in its own process group, with the
    test run it started), so no mutant is left written into a tree copy by an orphan."""
    for process in list(RUNNING):
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    raise SystemExit(128 + signum)


def cosmic_ray(args, command: str, config_file: Path, db_file: Path, tree: Path) -> None:
    """One cosmic-ray command in ``tree``; its own output only when it fails."""
    process = subprocess.Popen([args.cosmic_ray, command, str(config_file), str(db_file)], cwd=tree,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    RUNNING.add(process)
    try:
        _, stderr = process.communicate()
    finally:
        RUNNING.discard(process)
    if process.returncode:
        raise SystemExit(f"cosmic-ray {command} {config_file.name} failed ({process.returncode}):\n{stderr[-3000:]}")


@dataclass
class Session:
    """One source file's cosmic-ray session: its config, work db, scoped test command and drawn mutants."""

    module: str
    path: str
    config_file: Path
    db_file: Path
    tests: list[str]
    command: str
    candidates: list[tuple[str, str, tuple]] = field(default_factory=list)  # (draw hash, job id, key)
    drawn: set[str] = field(default_factory=set)
    score: Score = field(default_factory=lambda: Score(""))


def keyword_star(item, lines: list[str]) -> bool:
    """A ``*`` that marks keyword-only parameters: not arithmetic, so its "Mul" mutants are not mutants."""
    line_no, col = item.mutations[0].start_pos
    rest = lines[line_no - 1][col + 1:].lstrip()
    return lines[line_no - 1][col] == "*" and rest[:1] in (",", ")")


def prepare(module: str, path: str, tree: Path, out: Path, args) -> Session:
    """``cosmic-ray init`` for one file; mutants outside the operator set are marked skipped."""
    name = path.replace("/", "__").removesuffix(".py")
    tests = tests_for(path, tree)
    command = f"{args.python} -m pytest -x -q -p no:cacheprovider -p no:randomly {' '.join(tests)}"
    session = Session(module, path, out / "sessions" / f"{name}.toml", out / "sessions" / f"{name}.sqlite",
                      tests, command, score=Score(path))
    session.config_file.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{path}"\n'
        f"timeout = {float(CONFIG['timeout'])}\n"
        "excluded-modules = []\n"
        f'test-command = "{command}"\n'
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )
    if session.db_file.exists():
        session.db_file.unlink()
    cosmic_ray(args, "init", session.config_file, session.db_file, tree)
    include = re.compile("|".join(f"(?:{o})" for o in CONFIG["operators"]))
    lines = (tree / path).read_text().splitlines()
    with use_db(str(session.db_file), WorkDB.Mode.open) as db:
        items = sorted(db.pending_work_items, key=lambda i: (i.mutations[0].operator_name, i.mutations[0].occurrence))
        seen: dict = {}
        for item in items:
            mutation = item.mutations[0]
            if not include.match(mutation.operator_name) or keyword_star(item, lines):
                db.set_result(item.job_id, WorkResult(output="not in the operator set",
                                                      worker_outcome=WorkerOutcome.SKIPPED))
                continue
            draw = hashlib.sha256(f"{path}:{mutation.operator_name}:{mutation.occurrence}".encode()).hexdigest()
            session.candidates.append((draw, item.job_id, mutant_key(item, lines, seen)))
    session.score.total = len(session.candidates)
    return session


def mark(session: Session, known: list[Equivalent]) -> None:
    """Skip the mutants not drawn; count the drawn equivalents apart."""
    with use_db(str(session.db_file), WorkDB.Mode.open) as db:
        for _, job_id, key in session.candidates:
            if job_id not in session.drawn:
                db.set_result(job_id, WorkResult(output="not drawn", worker_outcome=WorkerOutcome.SKIPPED))
            elif (reason := equivalent_reason(known, key)) is not None:
                session.score.equivalent += 1
                db.set_result(job_id, WorkResult(output=f"equivalent: {reason}", worker_outcome=WorkerOutcome.SKIPPED))
    session.score.sampled = len(session.drawn)


def execute(session: Session, tree: Path, args, baselines: dict) -> Score:
    """``cosmic-ray exec`` of the drawn mutants in ``tree``, then the file's score and survivors."""
    score = session.score
    if not session.drawn:
        return score
    if not session.tests:
        score.note = "no test reaches it"
        score.survived = score.sampled - score.equivalent
        return score
    if session.command not in baselines:
        clean = subprocess.run(session.command, shell=True, cwd=tree, capture_output=True, text=True)
        baselines[session.command] = "" if clean.returncode == 0 else clean.stdout[-2000:]
    if baselines[session.command]:
        score.note = "the scoped tests fail unmutated"
        print(f"{session.path}: the scoped tests fail without a mutant:\n{baselines[session.command]}", file=sys.stderr)
        return score
    cosmic_ray(args, "exec", session.config_file, session.db_file, tree)
    keys = {job_id: key for _, job_id, key in session.candidates}
    with use_db(str(session.db_file), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            if result.worker_outcome == WorkerOutcome.NORMAL and result.test_outcome == TestOutcome.SURVIVED:
                score.survived += 1
                mutation, key = item.mutations[0], keys[item.job_id]
                score.survivors.append(
                    f"## {session.path}:{mutation.start_pos[0]} {mutation.operator_name}\n"
                    f"# equivalent.txt line: {key[0]} | {key[1]} | {key[3]} | {key[4]} | {key[2]} | <why>\n"
                    f"{result.diff}\n")
            elif result.worker_outcome == WorkerOutcome.NO_TEST:
                score.sampled -= 1
            else:
                score.killed += 1
    return score


def percent(killed: int, scored: int) -> str:
    return f"{100 * killed / scored:.1f}%" if scored else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", default="", help="one file or folder of the modules in pyproject.toml")
    parser.add_argument("--sample", type=int, default=int(CONFIG["sample"]),
                        help="mutants per module, 0 for all")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--python", required=True, help="the program's venv python that runs the tests")
    parser.add_argument("--out", default=str(ROOT / "build" / "mutation"))
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, stop_children)
    signal.signal(signal.SIGINT, stop_children)
    args.python = str(Path(args.python).absolute())
    args.cosmic_ray = str(Path(sys.executable).parent / "cosmic-ray")
    out = Path(args.out).absolute()
    (out / "sessions").mkdir(parents=True, exist_ok=True)

    files: list[tuple[str, str]] = []  # (module, file)
    for module in CONFIG["modules"]:
        found = [module] if module.endswith(".py") else sorted(
            str(p.relative_to(ROOT)) for p in (ROOT / module).glob("*.py"))
        for path in found:
            wanted = args.module.rstrip("/")
            if not wanted or path == wanted or path.startswith(wanted + "/") or module == wanted:
                files.append((module, path))
    if not files:
        print(f"MODULE={args.module}: not one of {', '.join(CONFIG['modules'])} nor a file in them", file=sys.stderr)
        return 2

    known = equivalents()
    trees: queue.Queue[Path] = queue.Queue()
    for slot in range(max(1, args.jobs)):
        tree = out / f"tree-{slot}"
        copy_tree(tree)
        trees.put(tree)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        sessions = list(pool.map(lambda f: prepare(f[0], f[1], out / "tree-0", out, args), files))
    for module in dict.fromkeys(m for m, _ in files):
        pool = sorted((draw, job_id, s) for s in sessions if s.module == module for draw, job_id, _ in s.candidates)
        for _, job_id, session in (pool if args.sample == 0 else pool[:args.sample]):
            session.drawn.add(job_id)
    for session in sessions:
        mark(session, known)
    baselines: dict[str, str] = {}

    def job(session: Session) -> Score:
        tree = trees.get()
        try:
            score = execute(session, tree, args, baselines)
        finally:
            trees.put(tree)
        if session.drawn:
            print(f"{session.path}: {score.killed} killed / {score.scored} ({score.equivalent} equivalent) {score.note}",
                  flush=True)
        return score

    busiest_first = sorted(sessions, key=lambda s: -len(s.drawn))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(job, busiest_first))
    scores = [s.score for s in sessions]

    by_module: dict[str, list[Score]] = {}
    for (module, _), score in zip(files, scores):
        by_module.setdefault(module, []).append(score)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    sample = "every mutant" if args.sample == 0 else f"{args.sample} mutants per module, drawn by a stable hash"
    lines = [f"Mutation scores, {when}, cosmic-ray {version('cosmic-ray')}, {sample}.", "",
             "| module / file | killed / scored | score | equivalent | drawn | mutants (operator set) |",
             "|---|---|---|---|---|---|"]
    failing = []
    for module, module_scores in by_module.items():
        killed = sum(s.killed for s in module_scores)
        scored = sum(s.scored for s in module_scores)
        lines.append(f"| **{module}** | **{killed} / {scored}** | **{percent(killed, scored)}** | "
                     f"{sum(s.equivalent for s in module_scores)} | {sum(s.sampled for s in module_scores)} | "
                     f"{sum(s.total for s in module_scores)} |")
        if scored and 100 * killed / scored < float(CONFIG["fail-under"]):
            failing.append(module)
        if len(module_scores) > 1:
            for s in module_scores:
                note = f" ({s.note})" if s.note else ""
                lines.append(f"| {s.path}{note} | {s.killed} / {s.scored} | {percent(s.killed, s.scored)} | "
                             f"{s.equivalent} | {s.sampled} | {s.total} |")
    report = "\n".join(lines) + "\n"
    (out / "report.md").write_text(report)
    (out / "survivors.txt").write_text("\n".join(x for s in scores for x in s.survivors))
    print(report)
    print(f"survivors' diffs: {out / 'survivors.txt'}")
    if failing:
        print(f"under {CONFIG['fail-under']}% killed: {', '.join(failing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
