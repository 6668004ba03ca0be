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
import glob
import hashlib
import os
import queue
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timezone
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


def equivalents() -> dict[tuple, str]:
    """(file, operator, source line, column in it, n-th at that column) -> reason."""
    table = {}
    for number, line in enumerate((ROOT / CONFIG["equivalents"]).read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(" | ")]
        if len(parts) != 6:
            sys.exit(f"{CONFIG['equivalents']}:{number}: need 'file | operator | column | nth | source line | reason'")
        path, operator, column, nth, source, reason = parts
        table[(path, operator, source, int(column), int(nth))] = reason
    return table


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


def cosmic_ray(args, command: str, config_file: Path, db_file: Path, tree: Path) -> None:
    """One cosmic-ray command in ``tree``; its own output only when it fails."""
    done = subprocess.run([args.cosmic_ray, command, str(config_file), str(db_file)], cwd=tree,
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"cosmic-ray {command} {config_file.name} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def run_file(path: str, tree: Path, out: Path, args, known: dict, baselines: dict) -> Score:
    score = Score(path)
    tests = tests_for(path, tree)
    if not tests:
        score.note = "no test reaches it"
    name = path.replace("/", "__").removesuffix(".py")
    config_file, db_file = out / "sessions" / f"{name}.toml", out / "sessions" / f"{name}.sqlite"
    command = f"{args.python} -m pytest -x -q -p no:cacheprovider -p no:randomly {' '.join(tests)}"
    config_file.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{path}"\n'
        f"timeout = {float(CONFIG['timeout'])}\n"
        "excluded-modules = []\n"
        f'test-command = "{command}"\n'
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )
    if db_file.exists():
        db_file.unlink()
    cosmic_ray(args, "init", config_file, db_file, tree)
    include = re.compile("|".join(f"(?:{o})" for o in CONFIG["operators"]))
    lines = (tree / path).read_text().splitlines()
    with use_db(str(db_file), WorkDB.Mode.open) as db:
        items = [i for i in db.pending_work_items]
        chosen, seen = [], {}
        for item in items:
            if include.match(item.mutations[0].operator_name):
                chosen.append(item)
            else:
                db.set_result(item.job_id, WorkResult(output="operator not in the set", worker_outcome=WorkerOutcome.SKIPPED))
        score.total = len(chosen)

        def draw(item) -> str:
            m = item.mutations[0]
            return hashlib.sha256(f"{m.module_path}:{m.operator_name}:{m.occurrence}".encode()).hexdigest()

        chosen.sort(key=draw)
        keep = chosen if args.sample == 0 else chosen[:args.sample]
        for item in chosen[len(keep):]:
            db.set_result(item.job_id, WorkResult(output="not drawn", worker_outcome=WorkerOutcome.SKIPPED))
        keep.sort(key=lambda i: (i.mutations[0].operator_name, i.mutations[0].occurrence))
        for item in keep:
            key = mutant_key(item, lines, seen)
            if key in known:
                score.equivalent += 1
                db.set_result(item.job_id, WorkResult(output=f"equivalent: {known[key]}",
                                                      worker_outcome=WorkerOutcome.SKIPPED))
        score.sampled = len(keep)
    if not tests:
        score.survived = score.sampled - score.equivalent
        return score
    if command not in baselines:
        clean = subprocess.run(command, shell=True, cwd=tree, capture_output=True, text=True)
        baselines[command] = "" if clean.returncode == 0 else clean.stdout[-2000:]
    if baselines[command]:
        score.note = "the scoped tests fail unmutated"
        print(f"{path}: the scoped tests fail without a mutant:\n{baselines[command]}", file=sys.stderr)
        return score
    cosmic_ray(args, "exec", config_file, db_file, tree)
    with use_db(str(db_file), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            if result.worker_outcome == WorkerOutcome.NORMAL and result.test_outcome == TestOutcome.SURVIVED:
                score.survived += 1
                mutation = item.mutations[0]
                key = mutant_key(item, lines, {})
                score.survivors.append(
                    f"## {path}:{mutation.start_pos[0]} {mutation.operator_name} (occurrence {mutation.occurrence})\n"
                    f"# equivalent.txt key: {key[0]} | {key[1]} | {key[3]} | {key[4]} | {key[2]} | <reason>\n"
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
    parser.add_argument("--sample", type=int, default=int(CONFIG["sample"]), help="mutants per file, 0 for all")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--python", required=True, help="the program's venv python that runs the tests")
    parser.add_argument("--out", default=str(ROOT / "build" / "mutation"))
    args = parser.parse_args()
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
    baselines: dict[str, str] = {}

    def job(path: str) -> Score:
        tree = trees.get()
        try:
            score = run_file(path, tree, out, args, known, baselines)
        finally:
            trees.put(tree)
        print(f"{path}: {score.killed} killed / {score.scored} ({score.equivalent} equivalent) {score.note}",
              flush=True)
        return score

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        scores = list(pool.map(job, [path for _, path in files]))

    by_module: dict[str, list[Score]] = {}
    for (module, _), score in zip(files, scores):
        by_module.setdefault(module, []).append(score)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    sample = "every mutant" if args.sample == 0 else f"{args.sample} mutants per file, drawn by a stable hash"
    lines = [f"Mutation scores, {when}, cosmic-ray {version('cosmic-ray')}, {sample}.", "",
             "| module / file | killed / scored | score | equivalent | mutants in the file (operator set) |",
             "|---|---|---|---|---|"]
    failing = []
    for module, module_scores in by_module.items():
        killed = sum(s.killed for s in module_scores)
        scored = sum(s.scored for s in module_scores)
        lines.append(f"| **{module}** | **{killed} / {scored}** | **{percent(killed, scored)}** | "
                     f"{sum(s.equivalent for s in module_scores)} | {sum(s.total for s in module_scores)} |")
        if scored and 100 * killed / scored < float(CONFIG["fail-under"]):
            failing.append(module)
        if len(module_scores) > 1:
            for s in module_scores:
                note = f" ({s.note})" if s.note else ""
                lines.append(f"| {s.path}{note} | {s.killed} / {s.scored} | {percent(s.killed, s.scored)} | "
                             f"{s.equivalent} | {s.total} |")
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
