"""Time to the first model: the labelling app's, and the getting-started MNIST run's (issue 29).

Two measurements, each with the first default (the BatchBALD paper's epochs of at least
5,056 draws, ``training="paper"``, and BADGE scored with K = 100) and the default (epochs
sized by the labelled set with early stopping, ``training="data"``, and BADGE scored with
``mean_samples = 20``), interleaved on the same machine in one run; ``--settings`` adds
``data-k100`` (the default training, BADGE with K = 100) to time the two changes apart:

* **first model**: a labelling project on a folder of 64x64 RGB images (``--images``
  per class, the embedded digits of ``--classes`` scaled up), round 0 proposed as the app
  does before it serves, then 10 answers with the true labels; timed is what the app's
  worker does after the 10th label: commit the round, train the first model and score the
  pool (:meth:`LabellingProject.advance`), i.e. the time until the page shows model picks.
* **getting-started MNIST run**: ``activebayes run --dataset mnist --data-dir
  ../shared/data/mnist`` (the docs' command; ``--training paper`` for the previous default),
  in a fresh process, wall time including imports. ``--skip-mnist`` leaves it out.

The machine's load average and the CPU seconds used are printed with every wall time
(the development machine is shared: wall times on a busy machine vary tenfold, CPU
seconds much less). Results are appended to ``benchmarks/results/first_model.json``.

    python benchmarks/first_model.py
    python benchmarks/first_model.py --skip-mnist --repeats 2
    python benchmarks/first_model.py --skip-first-model --settings data-k100,after
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "first_model.json"
SETTINGS = {  # label -> (training, mean_samples)
    "before": ("paper", 100),
    "data-k100": ("data", 100),
    "after": ("data", 20),
}


def make_folder(folder: Path, classes: list[int], per_class: int, size: int) -> None:
    """``per_class`` 64x64 RGB PNGs per class (embedded digits scaled up), one subfolder per class."""
    import numpy as np
    from PIL import Image

    from activebayes.data import load_dataset

    digits = load_dataset("digits", split="train")
    images = np.asarray(digits.inputs)[:, 0]
    targets = np.asarray(digits.targets)
    for c in classes:
        (folder / str(c)).mkdir(parents=True, exist_ok=True)
        for k, i in enumerate(np.flatnonzero(targets == c)[:per_class]):
            pixels = images[i]
            pixels = (255 * (pixels - pixels.min()) / (np.ptp(pixels) or 1.0)).astype(np.uint8)
            Image.fromarray(pixels).resize((size, size), Image.BILINEAR).convert("RGB").save(folder / str(c) / f"{k:03d}.png")


def first_model(folder: Path, classes: list[int], setting: str, n_labels: int, max_epochs: int | None) -> dict:
    """Seconds from the 10th answer to the first model's proposal, in this process."""
    from activebayes.labelling import LabellingProject, ProjectConfig
    from activebayes.models.training import PAPER_FIT_OPTIONS

    fit_options = dict(PAPER_FIT_OPTIONS) if setting == "paper" else {}
    if max_epochs is not None:
        fit_options["max_epochs"] = max_epochs
    with tempfile.TemporaryDirectory() as tmp:
        config = ProjectConfig(images=str(folder), classes=tuple(str(c) for c in classes), fit_options=fit_options)
        project = LabellingProject.create(Path(tmp) / "project", config)
        try:
            loop, proposal = project.advance(min_pending=10**12)  # round 0, as `activebayes label` does first
            truth = {item.id: classes.index(int(item.key.split("/")[0])) for item in project.store.items()}
            for index in proposal.indices[:n_labels]:
                item = project.item_ids[index]
                project.store.answer(item, truth[item], "benchmark")
            tic, cpu = time.perf_counter(), time.process_time()
            loop, following = project.advance(loop)
            seconds, cpu = time.perf_counter() - tic, time.process_time() - cpu
        finally:
            project.close()
    return {"seconds": round(seconds, 2), "cpu_s": round(cpu, 2), "load": round(os.getloadavg()[0], 2),
            "fit_s": round(following.seconds.get("fit", float("nan")), 2),
            "epochs": following.fit.get("epochs_run"), "labels": following.n_labelled,
            "next_strategy": following.strategy}


def mnist_run(setting: tuple[str, int], data_dir: str, budget: int | None) -> dict:
    """Wall seconds of the getting-started command in a fresh process."""
    training, mean_samples = setting
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "activebayes", "run", "-q", "--dataset", "mnist", "--data-dir", data_dir,
                   "--training", training, "--mean-samples", str(mean_samples), "--out", str(Path(tmp) / "run")]
        if budget is not None:
            command += ["--budget", str(budget)]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        load_before = os.getloadavg()[0]
        tic, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        seconds, after = time.perf_counter() - tic, resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (cpu.ru_utime + cpu.ru_stime)
        if done.returncode != 0:
            raise RuntimeError(f"the MNIST run failed: {done.stderr[-2000:]}")
        summary = json.loads((Path(tmp) / "run" / "summary.json").read_text())
    acc = summary["learning_curve"]["accuracy"][-1]
    return {"seconds": round(seconds, 1), "cpu_s": round(cpu, 1), "load": round((load_before + os.getloadavg()[0]) / 2, 2),
            "final_accuracy": acc}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classes", default="0,1,2", help="digit classes of the image folder [0,1,2]")
    parser.add_argument("--per-class", type=int, default=20, help="images per class [20: 60 images]")
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--labels", type=int, default=10, help="answers before the first model [10]")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--skip-mnist", action="store_true")
    parser.add_argument("--skip-first-model", action="store_true", help="only the getting-started MNIST run")
    parser.add_argument("--mnist-budget", type=int, default=None, help="--budget of the MNIST run [its default, 150]")
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "mnist"))
    parser.add_argument("--settings", default="before,after",
                        help=f"comma-separated, interleaved in this order: {', '.join(SETTINGS)} [before,after]")
    parser.add_argument("--before-max-epochs", type=int, default=None,
                        help="cap the previous default's epochs (it runs all 30 without a validation set: "
                             "minutes to hours on a busy CPU); the row then says so, and "
                             "'before, 30 epochs (est.)' scales its fit time to 30 epochs")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    classes = [int(c) for c in args.classes.split(",")]
    settings = args.settings.split(",")
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        parser.error(f"--settings: unknown {', '.join(unknown)}; expected some of {', '.join(SETTINGS)}")
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "images"
        make_folder(folder, classes, args.per_class, args.size)
        for repeat in range(0 if args.skip_first_model else args.repeats):
            for label in settings:  # interleaved: before, after, before, after, ...
                cap = args.before_max_epochs if label == "before" else None
                row = {"what": "first model", "setting": label if cap is None else f"before, {cap} epochs",
                       "training": SETTINGS[label][0], "repeat": repeat,
                       **first_model(folder, classes, SETTINGS[label][0], args.labels, cap)}
                print(json.dumps(row), flush=True)
                rows.append(row)
                if cap is not None:  # the same per-epoch time for all 30 epochs (none stops early)
                    estimate = round(row["seconds"] + row["fit_s"] * (30 / row["epochs"] - 1), 1)
                    cpu_estimate = round(row["cpu_s"] * (row["fit_s"] * 30 / row["epochs"] + row["seconds"] - row["fit_s"])
                                         / row["seconds"], 1)
                    rows.append({**row, "setting": "before, 30 epochs (est.)", "seconds": estimate,
                                 "cpu_s": cpu_estimate})
    if not args.skip_mnist:
        for repeat in range(args.repeats):
            for label in settings:
                row = {"what": "getting-started mnist run", "setting": label, "training": SETTINGS[label][0],
                       "mean_samples": SETTINGS[label][1], "repeat": repeat,
                       **mnist_run(SETTINGS[label], args.data_dir, args.mnist_budget)}
                print(json.dumps(row), flush=True)
                rows.append(row)
    print(f"\n{'measurement':<28}{'setting':<36}{'seconds':>9}{'cpu s':>9}{'load':>7}")
    for row in rows:
        print(f"{row['what']:<28}{row['setting'] + ' (' + row['training'] + ')':<36}{row['seconds']:>9}{row.get('cpu_s', '-'):>9}{row['load']:>7}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(RESULTS.read_text()) if RESULTS.is_file() else []
    previous.append({"when": time.strftime("%Y-%m-%d %H:%M"), "host": platform.node(), "cpus": os.cpu_count(),
                     "args": vars(args), "rows": rows})
    RESULTS.write_text(json.dumps(previous, indent=1) + "\n")


if __name__ == "__main__":
    main()
