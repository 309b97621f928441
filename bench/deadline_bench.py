"""The deadline benchmark's driver (bench/deadline-bench.sh). One imgd warms lists from a local
origin that delays every response (a remote origin's round trip; fleet_bench.DelayedOrigin):

1. estimate: one list with a far deadline; `lists` is read every 0.5 s, and the `eta` shown when
   a quarter, half and three quarters of the list had settled is compared with the finish;
2. share: a list without a deadline and, 0.5 s later, an equal list whose deadline it can meet
   only with more than an equal share; then the same two lists, both without a deadline.
   Reported: each list's completion and whether the deadline was met.
Python 3 stdlib only."""
import json, os, shutil, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet_bench import DelayedOrigin, call  # noqa: E402


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class Daemon:
    def __init__(self, imgd, work, parallel):
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        self.work, self.sock = work, f"{work}/imgd.sock"
        self.process = subprocess.Popen(
            [imgd, "--spool", f"{work}/spool", "--cache", f"{work}/cache", "--state", f"{work}/state", "--socket", self.sock,
             "--max-parallel", str(parallel), "--max-per-host", str(parallel), "--courtesy", "false", "--disk-limit", "4GiB"],
            stdout=open(f"{work}/imgd.log", "w"), stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while not os.path.exists(self.sock):
            if time.time() > deadline:
                sys.exit("imgd did not start")
            time.sleep(0.05)

    def drop(self, name, text):
        path = f"{self.work}/spool/.{name}.part"
        with open(path, "w") as f:
            f.write(text)
        os.rename(path, f"{self.work}/spool/{name}")

    def lists(self):
        return {l["name"]: l for l in call(self.sock, {"cmd": "lists"})["result"]["lists"]}

    def stop(self):
        self.process.terminate()
        self.process.wait()


def urls(origin, names, tag):
    return "".join(f"http://127.0.0.1:{origin.port}/{n}?l={tag}\n" for n in names)


def main():
    imgd, work, corpus, count, delay, parallel = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
    with open(f"{corpus}/manifest.tsv") as manifest:
        names = sorted(line.split("\t")[0] for line in manifest if line.startswith("s/"))[:count]
    origin = DelayedOrigin(corpus, delay / 1000)
    rows = []

    # 1. The estimate's error.
    daemon = Daemon(imgd, f"{work}/estimate", parallel)
    try:
        start = time.time()
        daemon.drop("solo.txt", f"# ready-by: {iso(start + 3600)}\n" + urls(origin, names, "solo"))
        seen = {}
        while True:
            entry = daemon.lists().get("solo.txt")
            if entry and entry["state"] in ("done", "failed"):
                finish = (entry.get("finished_at") or 0) / 1000 or time.time()
                break
            if entry and entry.get("eta") and entry["total"]:
                settled = 1 - entry["pending"] / entry["total"]
                for mark in (0.25, 0.5, 0.75):
                    if settled >= mark and mark not in seen:
                        seen[mark] = (time.time(), entry["eta"] / 1000)
            time.sleep(0.5)
        finish = time.time()
        solo = finish - start
        for mark in sorted(seen):
            at, eta = seen[mark]
            rows.append(f"| estimate at {int(mark * 100)}% settled | eta − finish {eta - finish:+.2f} s "
                        f"({abs(eta - finish) / max(finish - at, 0.001) * 100:.0f}% of the time left) | list of {count} in {solo:.1f} s |")
    finally:
        daemon.stop()

    # 2. The share: the deadline is 1.6 × the solo time from the urgent list's drop (an equal
    # share needs about 2 ×, four shares of five about 1.25 ×).
    for variant in ("deadline", "none"):
        daemon = Daemon(imgd, f"{work}/share-{variant}", parallel)
        try:
            t0 = time.time()
            daemon.drop("calm.txt", urls(origin, names, f"calm-{variant}"))
            time.sleep(0.5)
            t1 = time.time()
            ready_by = t1 + 1.6 * solo
            header = f"# ready-by: {iso(ready_by)}\n" if variant == "deadline" else ""
            daemon.drop("urgent.txt", header + urls(origin, names, f"urgent-{variant}"))
            done = {}
            while len(done) < 2:
                for name, entry in daemon.lists().items():
                    if entry["state"] in ("done", "failed") and name not in done:
                        done[name] = (time.time(), entry.get("deadline_met"))
                time.sleep(0.2)
            urgent_at, met = done["urgent.txt"]
            calm_at, _ = done["calm.txt"]
            verdict = ("met" if met else "missed") if variant == "deadline" else (
                "would have met" if urgent_at <= ready_by else "would have missed")
            rows.append(f"| share, urgent list {'with' if variant == 'deadline' else 'without'} a deadline of {1.6 * solo:.1f} s "
                        f"| urgent done in {urgent_at - t1:.1f} s ({verdict}) | calm done in {calm_at - t0:.1f} s |")
        finally:
            daemon.stop()
    print("| run | figure | context |\n|---|---|---|\n" + "\n".join(rows))


if __name__ == "__main__":
    main()
