"""One typed request from the API call to the decoder: what Engine.infill/generate/optimize
build, and the same request over the worker's and the server's frames."""

from __future__ import annotations

import pytest

from engine.decoding.base import EngineBase
from engine.serving.client import AsyncEngine
from engine.types import (EngineError, GenerateRequest, InfillRequest, OptimizeRequest, Sampling, request_from_wire,
                          request_to_wire)


class Recorder(EngineBase):
    """A backend whose `run` keeps the request it was given (the base is what is tested)."""

    def run(self, request, on_progress=None, should_cancel=None):
        self.request = request
        return []


def test_the_three_methods_build_one_request_with_designs_defaults():
    engine = Recorder()
    engine.infill("a", "b", reference="ref", temperature=0.5, preset="dice")
    assert engine.request == InfillRequest("a", "b", "ref", n=1, max_tokens=256, sampling=Sampling.for_preset("dice", temperature=0.5))
    engine.generate("int main", n=2, seed=3)
    assert engine.request == GenerateRequest("int main", n=2, max_tokens=512, sampling=Sampling(seed=3))
    engine.optimize("__global__ void k() {}", language="kernelbench", max_tokens=64)
    assert engine.request == OptimizeRequest("__global__ void k() {}", "kernelbench", n=1, max_tokens=64, sampling=Sampling())


@pytest.mark.parametrize("request_", [
    InfillRequest("a", "b", n=3, max_tokens=16, sampling=Sampling.for_preset("dice", seed=4)),
    GenerateRequest("p", max_tokens=8, sampling=Sampling(temperature=0.7, top_k=20, block_size=8)),
    OptimizeRequest("code", "kernelbench", n=2, max_tokens=32, sampling=Sampling(strategy="sequential", steps=2)),
])
def test_a_request_crosses_the_wire_unchanged(request_):
    wire = request_to_wire(request_)
    assert isinstance(wire["sampling"], dict)
    assert request_from_wire(request_.method, wire) == request_


def test_bad_wire_arguments_are_told_apart():
    with pytest.raises(TypeError):
        request_from_wire("infill", {"prefix": "a"})  # no suffix
    with pytest.raises(TypeError):
        request_from_wire("generate", {"prompt": "a", "on_progress": 1})
    with pytest.raises(EngineError, match="unknown sampling option"):
        request_from_wire("generate", {"prompt": "a", "sampling": {"temprature": 1}})
    # A frame with only some names (an older client's): the method's and the preset's defaults.
    request = request_from_wire("generate", {"prompt": "a", "sampling": {"preset": "dice"}})
    assert request == GenerateRequest("a", n=1, max_tokens=512, sampling=Sampling.for_preset("dice"))


def test_the_async_client_refuses_a_bad_sampling_name_before_starting_anything():
    client = AsyncEngine("builtin")
    with pytest.raises(EngineError, match="unknown sampling option"):
        client.infill("a", "b", temprature=0.5)  # raised at the call: no worker, no frame
    assert client._process is None and client._writer is None
