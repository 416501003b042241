#!/usr/bin/python3
"""Real architectures as ONNX models, with an input and torch's reference output.

Usage: make_models.py OUT_DIR [MODEL ...]   (default: every model of MODELS)
       make_models.py --onnx MODEL FILE        (only MODEL's model.onnx, written to FILE)

For each model, OUT_DIR/<model>/ gets model.onnx, input_0.pb and output_0.pb (ONNX TensorProto
files) and a stamp holding this script's hash, written last. A model whose stamp matches is not
exported again, so a second run costs only the interpreter's start.

Weights are random and seeded. What torchvision's default init leaves trivial is randomized too:
every bias, and every BatchNorm's weight, bias, running mean and running variance, so that a dropped
bias or a wrong BatchNorm fold changes the output. The reference is computed in float64 (the model
and input in double) and rounded to float32; the float32 model is what is exported.

Exit status: 0 when every requested model is there, 2 for a bad command line, 77 when a model has to
be exported and torch, torchvision or onnx cannot be imported.
"""

import copy
import hashlib
import os
import sys
import tempfile

OPSET = 13
IMAGE_SIZE = 224
VOCAB = 100
# The BERT-style encoders: a small one the tests run, and one layer at BERT-base's size
# (hidden 768, 12 heads, feed-forward 3072, 128 tokens) that only the benchmark asks for.
ENCODERS = {
    "bert_encoder": dict(hidden=64, heads=4, ffn=128, layers=2, seq=16),
    "bert_base_layer": dict(hidden=768, heads=12, ffn=3072, layers=1, seq=128),
}


def script_hash():
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def randomize_trivial_parameters(torch, model, calibration, gen):
    """Biases and BatchNorm parameters and statistics drawn at random (seeded through `gen`).

    A BatchNorm's running statistics are those of its input on `calibration`, perturbed (the mean
    by up to half a standard deviation, the variance by a factor in [0.5, 2]): activations keep
    their scale through a deep network as in a trained one, so an error in any layer's bias or
    normalization still shows in the output."""
    nn = torch.nn

    def calibrate(module, inputs):
        x = inputs[0]
        dims = [d for d in range(x.dim()) if d != 1]
        mean, var = x.mean(dim=dims), x.var(dim=dims, unbiased=False)
        noise = torch.empty_like(mean).uniform_(-0.5, 0.5, generator=gen)
        module.running_mean.copy_(mean + noise * var.sqrt())
        module.running_var.copy_(var.clamp(min=1e-3) * torch.empty_like(var).uniform_(0.5, 2.0, generator=gen))

    hooks = []
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.weight.copy_(torch.empty_like(module.weight).uniform_(0.5, 1.5, generator=gen))
                module.bias.copy_(torch.empty_like(module.bias).uniform_(-0.5, 0.5, generator=gen))
                hooks.append(module.register_forward_pre_hook(calibrate))
            elif isinstance(module, nn.LayerNorm):
                module.weight.copy_(torch.empty_like(module.weight).uniform_(0.5, 1.5, generator=gen))
                module.bias.copy_(torch.empty_like(module.bias).uniform_(-0.5, 0.5, generator=gen))
            elif getattr(module, "bias", None) is not None and isinstance(module.bias, nn.Parameter):
                module.bias.copy_(torch.empty_like(module.bias).uniform_(-0.2, 0.2, generator=gen))
        if hooks:
            model.eval()(calibration)
    for hook in hooks:
        hook.remove()


def build_encoder(torch, hidden, heads, ffn, layers, seq):
    """A BERT-style encoder: token and position embeddings, LayerNorm, `layers` post-norm layers
    of multi-head self-attention and a GELU feed-forward network, each with a residual."""
    nn = torch.nn

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query = nn.Linear(hidden, hidden)
            self.key = nn.Linear(hidden, hidden)
            self.value = nn.Linear(hidden, hidden)
            self.out = nn.Linear(hidden, hidden)

        def forward(self, x):
            b, s, _ = x.shape
            d = hidden // heads

            def split(t):
                return t.reshape(b, s, heads, d).transpose(1, 2)

            q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / (d**0.5)
            ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
            return self.out(ctx.transpose(1, 2).reshape(b, s, hidden))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = SelfAttention()
            self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
            self.ffn_in = nn.Linear(hidden, ffn)
            self.ffn_out = nn.Linear(ffn, hidden)
            self.norm2 = nn.LayerNorm(hidden, eps=1e-12)

        def forward(self, x):
            x = self.norm1(x + self.attention(x))
            return self.norm2(x + self.ffn_out(nn.functional.gelu(self.ffn_in(x))))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(VOCAB, hidden)
            self.positions = nn.Parameter(torch.randn(1, seq, hidden) * 0.5)
            self.norm = nn.LayerNorm(hidden, eps=1e-12)
            self.layers = nn.ModuleList([Layer() for _ in range(layers)])

        def forward(self, ids):
            x = self.norm(self.tokens(ids) + self.positions)
            for layer in self.layers:
                x = layer(x)
            return x

    return Encoder()


def build(name, torch, torchvision):
    """The model in eval mode and its input (float32 or int64)."""
    gen = torch.Generator().manual_seed(0x6B696C6E)
    torch.manual_seed(1234)
    if name in ENCODERS:
        model = build_encoder(torch, **ENCODERS[name])
        x = torch.randint(0, VOCAB, (1, ENCODERS[name]["seq"]), generator=gen, dtype=torch.int64)
        calibration = x
    else:
        model = getattr(torchvision.models, name)(weights=None)
        x = torch.randn(1, 3, IMAGE_SIZE, IMAGE_SIZE, generator=gen)
        calibration = torch.randn(2, 3, IMAGE_SIZE, IMAGE_SIZE, generator=gen)
    randomize_trivial_parameters(torch, model, calibration, gen)
    return model.eval(), x


def write_onnx(torch, model, x, path):
    """The model exported with input x to `path`, through a temporary file in its folder and a
    rename, so that an interrupted run never leaves a half-written model."""
    import onnx

    fd, tmp_model = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".model", suffix=".onnx")
    os.close(fd)
    try:
        with torch.no_grad():
            torch.onnx.export(model, (x,), tmp_model, opset_version=OPSET, do_constant_folding=True,
                              input_names=["input"], output_names=["output"])
        onnx.checker.check_model(tmp_model)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_model, 0o666 & ~umask)
        os.replace(tmp_model, path)
    finally:
        if os.path.exists(tmp_model):
            os.remove(tmp_model)


def export(name, out_dir, stamp):
    import onnx.numpy_helper
    import torch
    import torchvision

    torch.use_deterministic_algorithms(True)
    model, x = build(name, torch, torchvision)
    with torch.no_grad():
        reference = copy.deepcopy(model).double()
        ref = reference(x.double() if x.is_floating_point() else x).float()

    final = os.path.join(out_dir, name)
    os.makedirs(final, exist_ok=True)
    # Everything is written under a temporary name in the model's folder and renamed into place, so a
    # concurrent run (one test per model) or an interrupted one never leaves a half-written file.
    def put(file_name, data):
        fd, tmp = tempfile.mkstemp(dir=final, prefix="." + file_name)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(final, file_name))

    write_onnx(torch, model, x, os.path.join(final, "model.onnx"))
    put("input_0.pb", onnx.numpy_helper.from_array(x.numpy(), "input").SerializeToString())
    put("output_0.pb", onnx.numpy_helper.from_array(ref.numpy(), "output").SerializeToString())
    put("stamp", (stamp + "\n").encode())


FILES = ["model.onnx", "input_0.pb", "output_0.pb"]
MODELS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x1_0", "bert_encoder"]
BENCH_MODELS = ["bert_base_layer"]  # exported only when asked for by name


def is_current(out_dir, name, stamp):
    folder = os.path.join(out_dir, name)
    try:
        with open(os.path.join(folder, "stamp")) as f:
            if f.read().strip() != stamp:
                return False
    except OSError:
        return False
    return all(os.path.isfile(os.path.join(folder, f)) for f in FILES)


def imports_torch(what):
    try:
        import onnx  # noqa: F401
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as e:
        print("cannot export %s: %s" % (what, e), file=sys.stderr)
        return False
    return True


def export_one(name, path):
    """Only the model, at `path` (what scripts/tune.sh tunes)."""
    if name not in MODELS + BENCH_MODELS:
        print("unknown model %s; known: %s" % (name, " ".join(MODELS + BENCH_MODELS)), file=sys.stderr)
        return 2
    if not imports_torch(name):
        return 77
    import torch
    import torchvision

    torch.use_deterministic_algorithms(True)
    model, x = build(name, torch, torchvision)
    write_onnx(torch, model, x, path)
    print("exported %s to %s" % (name, path))
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "--onnx":
        if len(argv) != 4:
            print(__doc__.strip().splitlines()[3], file=sys.stderr)
            return 2
        return export_one(argv[2], argv[3])
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out_dir, names = argv[1], argv[2:] or MODELS
    unknown = [n for n in names if n not in MODELS + BENCH_MODELS]
    if unknown:
        print("unknown model(s): %s; known: %s" % (" ".join(unknown), " ".join(MODELS + BENCH_MODELS)),
              file=sys.stderr)
        return 2
    stamp = script_hash()
    for name in names:
        if is_current(out_dir, name, stamp):
            continue
        if not imports_torch(name):
            return 77
        export(name, out_dir, stamp)
        print("exported %s" % name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
