"""Quickstart: segment an in-memory signal, read the result, save the plots.

python examples/quickstart.py [--n 1000000] [--out examples/output]
"""

from __future__ import annotations

import argparse
import os

import kcpstream
from kcpstream import datasets, metrics


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "output"))
    args = ap.parse_args()

    sig = datasets.changing_distribution(args.n, 6, seed=0)  # known change-points
    res = kcpstream.segment(sig.x)  # the number of change-points is chosen automatically
    print(res)
    print(res.to_dataframe())
    print("chosen by", res.selection)
    print("Hausdorff distance to the truth:", metrics.hausdorff(sig.changepoints, res.changepoints))

    import matplotlib

    matplotlib.use("Agg")
    os.makedirs(args.out, exist_ok=True)
    res.plot(sig.x, true_changepoints=sig.changepoints).figure.savefig(
        os.path.join(args.out, "quickstart_signal.png"), dpi=100
    )
    res.plot_path().figure.savefig(os.path.join(args.out, "quickstart_path.png"), dpi=100)
    res.plot_gain(sig.x, 0).figure.savefig(os.path.join(args.out, "quickstart_gain.png"), dpi=100)
    print("plots written to", args.out)


if __name__ == "__main__":
    main()
