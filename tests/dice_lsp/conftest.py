"""An editor for the tests: the real dice-lsp server as a subprocess, driven by pytest-lsp's
client with the capabilities of Neovim or VS Code, which applies the edits the server sends
(workspace/applyEdit) to its own copy of the text and reports them back with didChange, as an
editor does."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any, Union

import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types
from pygls.workspace import TextDocument
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

REPO = Path(__file__).resolve().parents[2]
CACHE_DIR = tempfile.mkdtemp(prefix="dice-lsp-test-cache-")
CLIENTS = ["neovim", "visual-studio-code"]
# Few, short candidates: the tiny model is garbage anyway; the pipeline is what is tested.
MODEL_TEST_SETTINGS = {"candidates": 2, "maxTokens": 8, "temperature": 1.0, "timeLimit": 60}

# A small kernel with a full benchmark spec, shared by the server tests.
SAXPY = """\
// dice: let n = 1 << 20
// dice: let a = 2.5
// dice: buffer x[n], y[n]
// dice: inout y
// dice: launch grid=(n + 255) / 256, block=256
__global__ void saxpy(float a, const float* __restrict__ x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
"""


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "one_client(name): the test does not depend on the client; it runs with this client's "
        "capabilities only (deselected for the others, not skipped)")


def pytest_collection_modifyitems(config, items) -> None:
    """The clients differ in how actions reach the server (resolve, command), which most tests
    cover with both; the rest of a job's life (cancel, crash, edits) runs once, with the client
    its `one_client` marker names."""
    deselected = []
    for item in items:
        marker = item.get_closest_marker("one_client")
        client = getattr(item, "callspec", None) and item.callspec.params.get("model_lsp")
        if marker is not None and client is not None and client != marker.args[0]:
            deselected.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item not in deselected]


def child_environment() -> dict[str, str]:
    """The environment for the processes the tests start: this checkout first on the path
    (before whatever PYTHONPATH brings, e.g. wheels unpacked on the GPU machine), and a
    results cache of the tests' own."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "DICE_CACHE_DIR": CACHE_DIR}


@pytest.fixture(scope="session")
def child_env() -> dict[str, str]:
    return child_environment()


def server_config() -> ClientServerConfig:
    return ClientServerConfig(server_command=[sys.executable, "-m", "dice_lsp.server"], server_env=child_environment())


class Editor:
    """Open documents, ask for actions, and apply edits like an editor would."""

    def __init__(self, client: LanguageClient, capabilities: types.ClientCapabilities) -> None:
        self.client = client
        self.capabilities = capabilities
        self.documents: dict[str, TextDocument] = {}
        self.statuses: list[dict[str, Any]] = []
        self.applied_edits: list[types.WorkspaceEdit] = []
        self.server_capabilities: types.ServerCapabilities | None = None
        self.server_info: types.ServerInfo | None = None
        self.initialization_options: dict | None = None
        self.reconfigured = False
        self.configuration_requests = 0  # sections read for workspace/configuration answers
        self.cache_dir = CACHE_DIR
        self.client_name = ""

    def reset(self) -> None:
        """Forget what earlier tests on the same server received."""
        self.client.messages.clear()
        self.client.progress_reports.clear()
        self.client.diagnostics.clear()
        self.statuses.clear()

    async def configure(self, **settings: Any) -> None:
        """Change dice settings as a user would (the server reads them on the notification)."""
        self.reconfigured = bool(settings)
        self.client.set_configuration({**MODEL_TEST_SETTINGS, "model": self.model, **settings}, section="dice")
        asked = self.configuration_requests
        self.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        workspace = self.capabilities.workspace
        if workspace and workspace.configuration:  # the server asks back with workspace/configuration
            await self.wait_for(lambda: self.configuration_requests > asked, what="workspace/configuration")
        # The server applies the answer as soon as it reads it; a request sent after a round
        # trip that began once the answer was sent is read after it.
        await self.sync()
        await self.sync()

    @property
    def model(self) -> str | None:
        options = self.initialization_options or {}
        return options.get("dice", {}).get("model")

    def open(self, path: Path, text: str | None = None) -> str:
        text = path.read_text() if text is None else text
        uri = path.as_uri()
        self.documents[uri] = TextDocument(uri, source=text, version=1)
        language = "python" if path.suffix == ".py" else "cuda"
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, language, 1, text))
        )
        return uri

    def text(self, uri: str) -> str:
        return self.documents[uri].source

    def change(self, uri: str, rng: types.Range, new_text: str) -> None:
        """Type over a range, as the user would, and tell the server."""
        document = self.documents[uri]
        event = types.TextDocumentContentChangePartial(range=rng, text=new_text)
        document.apply_change(event)
        document.version = (document.version or 0) + 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=uri, version=document.version), [event]
            )
        )

    def apply(self, edit: types.WorkspaceEdit) -> None:
        """Apply a WorkspaceEdit (changes or documentChanges), last edit first."""
        self.applied_edits.append(edit)
        per_uri: list[tuple[str, list[types.TextEdit]]] = []
        if edit.changes:
            per_uri += list(edit.changes.items())
        for change in edit.document_changes or []:
            if isinstance(change, types.TextDocumentEdit):
                if change.text_document.version not in (None, self.documents[change.text_document.uri].version):
                    raise AssertionError("edit for an outdated version of the document")
                per_uri.append((change.text_document.uri, list(change.edits)))
        for uri, edits in per_uri:
            for text_edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
                self.change(uri, text_edit.range, text_edit.new_text)

    async def code_actions(self, uri: str, rng: types.Range) -> list[types.CodeAction]:
        result = await self.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri),
                range=rng,
                context=types.CodeActionContext(diagnostics=[]),
            )
        )
        return [a for a in result or [] if isinstance(a, types.CodeAction)]

    async def run_action(self, action: types.CodeAction) -> Any:
        """What an editor does when the user picks the action: resolve it, or run its command."""
        if action.data is not None and action.edit is None:
            action = await self.client.code_action_resolve_async(action)
        if action.edit is not None:
            self.apply(action.edit)
        if action.command is not None:
            return await self.execute(action.command.command, *(action.command.arguments or []))
        return action

    async def sync(self) -> None:
        """A round trip: once answered, the server has handled every notification sent before."""
        await self.execute("dice.showCandidates", {})

    async def execute(self, command: str, *args: Any) -> Any:
        return await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=command, arguments=list(args))
        )

    async def wait_for(self, predicate, timeout: float = 60.0, what: str = "condition") -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            if loop.time() > deadline:
                raise AssertionError(f"timed out waiting for {what}; messages: {self.messages()[-3:]}")
            await asyncio.sleep(0.05)

    def messages(self) -> list[str]:
        return [m.message for m in self.client.messages]


def capabilities_without_resolve(name: str) -> types.ClientCapabilities:
    """A client like `name` that cannot resolve code actions (they must carry commands)."""
    caps = client_capabilities(name)
    caps.text_document.code_action.resolve_support = None
    return caps


def read_code_actions_like_editors(client: LanguageClient) -> None:
    """lsprotocol reads any code-action entry with a "command" key as a Command, so a
    CodeAction that carries a Command object would arrive mangled. Editors tell them apart
    by the key's type (a string for Command); do the same."""
    converter = client.protocol._converter

    def command_or_action(obj: Any, _: type) -> types.Command | types.CodeAction:
        kind = types.Command if isinstance(obj.get("command"), str) else types.CodeAction
        return converter.structure(obj, kind)

    converter.register_structure_hook(Union[types.Command, types.CodeAction], command_or_action)


async def start_editor(
    client: LanguageClient, capabilities: types.ClientCapabilities, root: Path, options: dict | None = None
) -> Editor:
    editor = Editor(client, capabilities)
    read_code_actions_like_editors(client)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        editor.apply(params.edit)
        return types.ApplyWorkspaceEditResult(applied=True)

    @client.feature("dice/status")
    def status(params: Any) -> None:
        editor.statuses.append(params if isinstance(params, dict) else params._asdict())

    read_configuration = client.get_configuration

    def answer_configuration(**where: Any) -> Any:
        # pytest-lsp's workspace/configuration handler reads here and answers at once:
        # configure() waits for it.
        editor.configuration_requests += 1
        return read_configuration(**where)

    client.get_configuration = answer_configuration

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def lens_refresh(params: None) -> None:
        return None

    result = await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities,
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(root.as_uri(), root.name)],
            initialization_options=options,
        )
    )
    editor.initialization_options = options
    editor.server_capabilities = result.capabilities
    editor.server_info = result.server_info
    return editor


async def stop_server(client: LanguageClient) -> None:
    """After a failed test the server may never have been told to exit: give it a few
    seconds, then end it, so that the client can stop."""
    process = client._server
    if process is None or process.returncode is not None:
        return
    try:
        await asyncio.wait_for(process.wait(), 10)
    except asyncio.TimeoutError:
        process.terminate()
        await process.wait()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest_lsp.fixture(config=server_config(), params=CLIENTS)
async def lsp(lsp_client: LanguageClient, request):
    """The real server, talked to with the capabilities of Neovim or of VS Code."""
    lsp_client.dice_capabilities = client_capabilities(request.param)
    yield
    await stop_server(lsp_client)


@pytest_lsp.fixture(config=server_config(), params=["neovim"])
async def lsp_without_resolve(lsp_client: LanguageClient, request):
    """Neovim's capabilities minus codeAction/resolve: actions must carry commands."""
    lsp_client.dice_capabilities = capabilities_without_resolve(request.param)
    yield
    await stop_server(lsp_client)


@pytest.fixture(scope="session")
def local_gpu() -> str | None:
    """The GPU the profiler sees here (None on a machine without one): what results say."""
    import profiler

    return profiler.gpu_name()


@pytest.fixture
def dice_settings() -> dict | None:
    """initializationOptions for the server; test modules override this fixture."""
    return None


@pytest_lsp.fixture(config=server_config(), params=CLIENTS, scope="module")
async def model_lsp(lsp_client: LanguageClient, request, tiny_checkpoint: Path, tmp_path_factory):
    """One server per test module and client kind, with the tiny model loaded: its engine
    worker starts once, not once per test."""
    root = tmp_path_factory.mktemp("ws")
    settings = {"dice": {**MODEL_TEST_SETTINGS, "model": str(tiny_checkpoint)}}
    lsp_client.editor = await start_editor(lsp_client, client_capabilities(request.param), root, settings)
    lsp_client.editor.root = root
    lsp_client.editor.client_name = request.param
    yield
    await asyncio.wait_for(lsp_client.shutdown_session(), 30)
    await stop_server(lsp_client)


@pytest_asyncio.fixture(loop_scope="module")
async def model_editor(model_lsp: LanguageClient):
    """The module's editor with the model, its record of messages and progress cleared, and
    the test settings back in place after a test that changed them."""
    editor = model_lsp.editor
    editor.reset()
    yield editor
    if editor.reconfigured:
        await editor.configure()
        editor.reconfigured = False


@pytest_asyncio.fixture
async def editor(lsp: LanguageClient, workspace: Path, dice_settings: dict | None):
    ed = await start_editor(lsp, lsp.dice_capabilities, workspace, dice_settings)
    yield ed
    await asyncio.wait_for(lsp.shutdown_session(), 30)


@pytest_asyncio.fixture
async def commands_editor(lsp_without_resolve: LanguageClient, workspace: Path, dice_settings: dict | None):
    ed = await start_editor(lsp_without_resolve, lsp_without_resolve.dice_capabilities, workspace, dice_settings)
    yield ed
    await asyncio.wait_for(lsp_without_resolve.shutdown_session(), 30)


# ------------------------------------------------------------------ raw frames
# Protocol faults (bad frames, bad params, lifecycle order, strangers on TCP) are sent as
# bytes, as a broken or hostile client would, where pytest-lsp's client would refuse to.


def frame(message: dict | bytes, length: int | None = None) -> bytes:
    body = message if isinstance(message, bytes) else json.dumps(message, ensure_ascii=False).encode()
    return b"Content-Length: %d\r\n\r\n" % (len(body) if length is None else length) + body


def request(msg_id: int, method: str, params: Any = None) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


def notification(method: str, params: Any = None) -> dict:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def initialize_params(root: Path | None = None, options: dict | None = None) -> dict:
    return {
        "processId": None,
        "rootUri": root.as_uri() if root else None,
        "capabilities": {},
        "initializationOptions": options,
    }


async def read_message(reader: asyncio.StreamReader) -> dict:
    length = None
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    if length is None:
        raise EOFError("the server closed the stream")
    return json.loads(await reader.readexactly(length))


class RawClient:
    """Frames over a stream, read as they come by a task of its own (so that a wait that
    times out never leaves half a message read); answers are picked out of `received`."""

    def __init__(self, reader: asyncio.StreamReader, writer: Any) -> None:
        self.reader = reader
        self.writer = writer
        self.received: list[dict] = []
        self.closed: BaseException | None = None
        self._arrived = asyncio.Event()
        self._pump = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            while True:
                self.received.append(await read_message(self.reader))
                self._arrived.set()
        except (EOFError, asyncio.IncompleteReadError, ConnectionError) as exc:
            self.closed = exc
            self._arrived.set()

    def send(self, data: dict | bytes) -> None:
        self.writer.write(data if isinstance(data, bytes) else frame(data))

    async def answer(self, msg_id: Any, timeout: float = 30) -> dict:
        """The response to request `msg_id` (an error or a result); EOFError if the server
        closes the stream first."""

        async def wait() -> dict:
            while True:
                self._arrived.clear()
                for message in self.received:
                    if "method" not in message and message.get("id") == msg_id:
                        return message
                if self.closed is not None:
                    raise EOFError(f"the server closed the stream: {self.closed!r}")
                await self._arrived.wait()

        return await asyncio.wait_for(wait(), timeout)

    async def call(self, msg_id: int, method: str, params: Any = None, timeout: float = 30) -> dict:
        self.send(request(msg_id, method, params))
        return await self.answer(msg_id, timeout)

    async def initialize(self, root: Path | None = None, options: dict | None = None) -> dict:
        answer = await self.call(0, "initialize", initialize_params(root, options))
        self.send(notification("initialized", {}))
        return answer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def start_stdio_server(env: dict[str, str]) -> tuple[asyncio.subprocess.Process, RawClient]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dice_lsp.server", env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        limit=64 * 1024 * 1024,
    )
    _drain_stderr(process)
    return process, RawClient(process.stdout, process.stdin)


def _drain_stderr(process: asyncio.subprocess.Process) -> None:
    """Read the server's stderr as it comes, into process.stderr_text (what end_process
    returns): a server that logs much (a line per evicted stranger) would otherwise fill the
    pipe, block in its own write and stop answering."""
    chunks: list[bytes] = []

    async def drain() -> str:
        while chunk := await process.stderr.read(1 << 16):
            chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")

    process.stderr_text = asyncio.ensure_future(drain())


async def start_tcp_server(env: dict[str, str], *args: str) -> tuple[asyncio.subprocess.Process, int]:
    """`dice-lsp --tcp` on a free loopback port (or as `args` say), once it listens. Its token
    file goes to a folder of the test's own ($XDG_RUNTIME_DIR); the token it holds is the
    process's `token`."""
    port = free_port()
    runtime = Path(tempfile.mkdtemp(prefix="dice-lsp-test-runtime-"))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dice_lsp.server", "--tcp", "--host", "127.0.0.1", "--port", str(port), *args,
        env={**env, "XDG_RUNTIME_DIR": str(runtime)}, stderr=asyncio.subprocess.PIPE,
    )
    _drain_stderr(process)
    token_file = runtime / "dice-lsp" / "tcp" / f"{port}.token"
    for _ in range(300):
        if token_file.exists():  # written once it listens
            process.token = token_file.read_text().strip()
            process.token_file = token_file
            return process, port
        if process.returncode is not None:
            break
        await asyncio.sleep(0.1)
    raise AssertionError(f"the server never listened: {(await end_process(process))[-2000:]}")


async def connect(port: int) -> RawClient:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=64 * 1024 * 1024)
    return RawClient(reader, writer)


async def end_process(process: asyncio.subprocess.Process) -> str:
    """Its stderr, after ending it if it still runs."""
    if process.returncode is None:
        process.terminate()
    drained = getattr(process, "stderr_text", None)
    if drained is not None:
        err = await drained
    else:
        err = (await process.stderr.read()).decode(errors="replace") if process.stderr else ""  # stdout is a RawClient's
    await process.wait()
    return err
