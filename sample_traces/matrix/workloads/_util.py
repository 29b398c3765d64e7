"""Small helpers shared by the matrix workloads (the harness itself is in ../record_matrix.py)."""

import torch

from workloads.common import Step, close_step, cpu_mode, is_cuda, sync  # noqa: F401  (re-exported)


def autocast(device, dtype=torch.bfloat16, enabled=True):
    dev = torch.device(device).type
    if dev == "cpu" and dtype == torch.float16:
        dtype = torch.bfloat16          # CPU smoke test only
    return torch.autocast(device_type=dev, dtype=dtype, enabled=enabled)


def mlp(din, dim, layers, dout, act=torch.nn.GELU, norm=False):
    mods = [torch.nn.Linear(din, dim), act()]
    for _ in range(layers):
        mods.append(torch.nn.Linear(dim, dim))
        if norm:
            mods.append(torch.nn.LayerNorm(dim))
        mods.append(act())
    mods.append(torch.nn.Linear(dim, dout))
    return torch.nn.Sequential(*mods)


def capture_graph(step_body, warmup=3, before_capture=None):
    """Capture ``step_body()`` (which must only touch static tensors) in a CUDA graph.

    Warm-up iterations run on a side stream first, as in the torch.cuda.graph docs.
    Returns the graph; replay with ``g.replay()``.
    """
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            step_body()
    torch.cuda.current_stream().wait_stream(s)
    if before_capture is not None:
        before_capture()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step_body()
    torch.cuda.synchronize()
    return g


def replay_step(g, feeds, after=None):
    """The step function of a captured graph: copy the next batch into each static input
    (``feeds``: (static tensor, pool of batches) pairs), replay, then ``after(i)`` if given."""
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        for static, pool in feeds:
            static.copy_(pool[i % len(pool)])
        g.replay()
        if after is not None:
            after(i)
    return step


def graphed_train_step(model, opt, d, batch, device, pool=2):
    """A bf16 training step (zero_grad, forward, squared-mean loss, backward, ``opt.step()``) captured in one CUDA
    graph; returns the step function, which replays it over a pool of ``pool`` random (batch, d) inputs."""
    xs = [torch.randn(batch, d, device=device) for _ in range(pool)]
    sx = xs[0].clone()

    def body():
        opt.zero_grad(set_to_none=False)
        # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
            out = model(sx)
        out.float().pow(2).mean().backward()
        opt.step()

    return replay_step(capture_graph(body, warmup=3), [(sx, xs)])
