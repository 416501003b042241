"""Times torch (cuBLAS, cuDNN) on the shapes of cuda_kernels_gen's manifest and prints, per shape,
torch's GFLOPS beside the harness's for Kiln's default config and for the best config the harness
timed (of the default and the random configs <shape>@<k>), and their ratios (Kiln / torch).

    python3 torch_baseline.py <folder> [harness output file]

The harness output is the text cuda_harness printed ("cuda_harness <name> ms=... gflops=...");
without it only torch's figures are printed. Events time `repeats` calls after a warm-up, as the
harness does. float32 runs with TF32 off (Kiln computes in float32); the float16 dense shapes
(dense_<n>_f16) call torch in float16, where cuBLAS uses the tensor cores.

The last lines give the geometric means the CUDA issue's goals name: the best float32 dense against
cuBLAS, and the best of conv2d_nchw.cuda and conv2d_nchw_implicit_gemm.cuda on each of ResNet-18's
3x3 convolutions against cuDNN.
"""
import math
import re
import sys

import torch


def shapes(name):
    """The torch call for a shape name: dense_<n>[_f16], conv_... or igemm_c<C>_hw<HW>_k<K>_s<S>."""
    m = re.fullmatch(r"dense_(\d+)(_f16)?", name)
    if m:
        n = int(m.group(1))
        dtype = torch.float16 if m.group(2) else torch.float32
        a = (torch.rand(n, n, device="cuda") * 2 - 1).to(dtype)
        w = (torch.rand(n, n, device="cuda") * 2 - 1).to(dtype)
        return lambda: torch.nn.functional.linear(a, w)
    m = re.fullmatch(r"(?:conv|igemm)_c(\d+)_hw(\d+)_k(\d+)_s(\d+)", name)
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


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 as Kiln computes it
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    kiln = {}  # shape -> {config index: GFLOPS}
    if len(sys.argv) == 3:
        for line in open(sys.argv[2]):
            m = re.match(r"cuda_harness (\S+) ms=\S+ gflops=(\S+)", line)
            if m:
                shape, _, k = m.group(1).partition("@")
                kiln.setdefault(shape, {})[int(k or 0)] = float(m.group(2))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, TF32 off")
    flops = {}
    for line in open(sys.argv[1] + "/manifest.txt"):
        fields = line.split()
        if fields and "@" not in fields[0]:
            flops[fields[0]] = float(fields[9])
    best_ratio = {}
    for name, flop in flops.items():
        gflops = flop / (time_ms(shapes(name)) * 1e-3) / 1e9
        line = f"torch_baseline {name} torch_gflops={gflops:.1f}"
        got = kiln.get(name, {})
        if 0 in got:
            line += f" kiln_default_gflops={got[0]:.1f} default_ratio={got[0] / gflops:.3f}"
        if got:
            k, best = max(got.items(), key=lambda kv: kv[1])
            best_ratio[name] = best / gflops
            line += f" kiln_best_gflops={best:.1f} best_config={k} of={len(got)} best_ratio={best / gflops:.3f}"
        print(line, flush=True)
    dense = [r for n, r in best_ratio.items() if re.fullmatch(r"dense_\d+", n)]
    convs = {}
    for n, r in best_ratio.items():
        m = re.fullmatch(r"(?:conv|igemm)_(.*)", n)
        if m:
            convs[m.group(1)] = max(convs.get(m.group(1), 0.0), r)
    print(f"torch_baseline geomean_dense_f32_best_vs_cublas={geomean(dense):.3f} ({len(dense)} shapes)")
    print(f"torch_baseline geomean_resnet18_3x3_best_vs_cudnn={geomean(list(convs.values())):.3f} ({len(convs)} shapes)")


if __name__ == "__main__":
    main()
