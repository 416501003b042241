"""Times torch (cuBLAS, cuDNN) on the shapes of cuda_kernels_gen's manifest and prints each
kernel's GFLOPS beside the harness's, and their ratio (Kiln / torch).

    python3 torch_baseline.py <folder> [harness output file]

The harness output is the text cuda_harness printed ("cuda_harness <name> ms=... gflops=...");
without it only torch's figures are printed. Events time `repeats` calls after a warm-up, as the
harness does.
"""
import re
import sys

import torch


def shapes(name):
    """The torch call for a manifest name: dense_1024 or conv_c<C>_hw<HW>_k<K>_s<S>."""
    if name.startswith("dense_"):
        n = int(name.split("_")[1])
        a = torch.rand(n, n, device="cuda") * 2 - 1
        w = torch.rand(n, n, device="cuda") * 2 - 1
        return lambda: torch.nn.functional.linear(a, w)
    m = re.fullmatch(r"conv_c(\d+)_hw(\d+)_k(\d+)_s(\d+)", name)
    if not m:
        raise SystemExit(f"torch_baseline: unknown kernel {name}")
    c, hw, k, s = (int(g) for g in m.groups())
    x = torch.rand(1, c, hw, hw, device="cuda") * 2 - 1
    w = torch.rand(k, c, 3, 3, device="cuda") * 2 - 1
    return lambda: torch.nn.functional.conv2d(x, w, stride=s, padding=1)


def time_ms(fn, repeats=100):
    fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / repeats


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 as Kiln computes it
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    kiln = {}
    if len(sys.argv) == 3:
        for line in open(sys.argv[2]):
            m = re.match(r"cuda_harness (\S+) ms=\S+ gflops=(\S+)", line)
            if m:
                kiln[m.group(1)] = float(m.group(2))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, TF32 off")
    for line in open(sys.argv[1] + "/manifest.txt"):
        fields = line.split()
        if not fields:
            continue
        name, flop = fields[0], float(fields[9])
        gflops = flop / (time_ms(shapes(name)) * 1e-3) / 1e9
        ratio = f" kiln_gflops={kiln[name]:.1f} ratio={kiln[name] / gflops:.3f}" if name in kiln else ""
        print(f"torch_baseline {name} gflops={gflops:.1f}{ratio}")


if __name__ == "__main__":
    main()
