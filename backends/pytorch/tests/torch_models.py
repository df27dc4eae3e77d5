"""Tiny PyTorch models built at test time (TorchScript via torch.jit.script, exported
programs via torch.export), and helpers to lay out a repository and serve it in-process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Tuple

import torch

from naiad import Server, ServerOptions


class MLP(torch.nn.Module):
    def __init__(self, features: int = 16, hidden: int = 32, classes: int = 8) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.hidden = torch.nn.Linear(features, hidden)
        self.out = torch.nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.out(torch.relu(self.hidden(x))), dim=1)


class AddSub(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return a + b, a - b


class AddSubDict(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> Dict[str, torch.Tensor]:
        return {"sum": a + b, "difference": a - b}


class Identity(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        return [x]


class Shout(torch.nn.Module):
    def forward(self, words: List[str]) -> List[str]:
        return [word.upper() + "!" for word in words]


def script(module: torch.nn.Module, path: Path) -> torch.jit.ScriptModule:
    path.parent.mkdir(parents=True, exist_ok=True)
    scripted = torch.jit.script(module.eval())
    torch.jit.save(scripted, str(path))
    return scripted


def export(module: torch.nn.Module, example: tuple[torch.Tensor, ...], path: Path, batch_dim: bool = True) -> Any:
    """torch.export the module (first dimension dynamic when `batch_dim`) and save it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    dynamic = None
    if batch_dim:
        batch = torch.export.Dim("batch", min=1, max=1024)
        dynamic = tuple({0: batch} for _ in example)
    program = torch.export.export(module.eval(), example, dynamic_shapes=dynamic)
    torch.export.save(program, str(path))
    return program


def write_config(repo: Path, name: str, config: str) -> None:
    (repo / name).mkdir(parents=True, exist_ok=True)
    (repo / name / "config.pbtxt").write_text(config)


def serve(repo: Path, body: Callable[[Server], Awaitable[Any]], **options: Any) -> Any:
    """Run `body(server)` against an in-process server on `repo` with only this backend."""
    from naiad_backend_pytorch import plugin

    async def go() -> Any:
        server = Server(
            ServerOptions([str(repo)], backend_plugins=[plugin], load_backend_entry_points=False, **options)
        )
        await server.start()
        try:
            return await body(server)
        finally:
            await server.stop()

    return asyncio.run(go())
