"""Read CUDA source with tree-sitter-cuda: the `__global__` functions, their parameters and
where they are. A parser, not regular expressions, so that comments, strings, templates,
`__launch_bounds__` and `extern "C"` do not fool it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

Point = tuple[int, int]  # 0-based (line, column), as tree-sitter counts


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # the element type for pointers: "float", "unsigned int", "__half", "T"
    pointer: bool
    const: bool  # for pointers: the pointee is const (an input); for scalars: the value is


@dataclass(frozen=True)
class Kernel:
    name: str
    start: Point  # start of the whole definition (template<> included)
    end: Point
    params: tuple[Param, ...]
    body_start: Point  # the opening brace
    body_end: Point  # just after the closing brace
    template: bool = False

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


@functools.cache
def _parser():
    import tree_sitter_cuda
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_cuda.language()))


def parse(source: str):
    """The tree-sitter tree of a CUDA document."""
    return _parser().parse(source.encode("utf-8"))


def _walk(node):
    """Every node where a function definition can be, in document order: not inside a
    well-formed function body, which is most of a file and, for a file of thousands of
    kernels, most of the time. A body with a syntax error (a brace left open while typing) may
    hold the kernels after it. A stack, not recursion: braces nested thousands deep are text
    anyone can type."""
    stack = [node]
    while stack:
        node = stack.pop()
        yield node
        if node.type == "compound_statement" and not node.has_error:
            continue
        stack.extend(reversed(node.children))


def _is_kernel(fn) -> bool:
    # tree-sitter-cuda gives `__global__` its own node type among the definition's children.
    return any(c.type == "__global__" for c in fn.children)


def _declarator_name(node) -> tuple[str | None, bool, bool]:
    """(name, is_pointer, pointer_itself_const) of a parameter's declarator chain."""
    pointer = False
    while node is not None:
        if node.type == "identifier":
            return node.text.decode(), pointer, False
        if node.type in ("pointer_declarator", "array_declarator", "abstract_pointer_declarator"):
            pointer = True
        node = node.child_by_field_name("declarator")
    return None, pointer, False


def _param(decl) -> Param | None:
    type_node = decl.child_by_field_name("type")
    declarator = decl.child_by_field_name("declarator")
    name, pointer, _ = _declarator_name(declarator)
    if name is None or type_node is None:
        return None
    # Qualifiers that are direct children of the declaration qualify the pointee
    # (`const float* x`, `float const* x`); one inside the pointer declarator qualifies the
    # pointer itself (`float* const x`), which does not make the buffer an input.
    const = any(c.type == "type_qualifier" and c.text.decode() == "const" for c in decl.children)
    type_name = " ".join(type_node.text.decode().split())
    return Param(name=name, type=type_name, pointer=pointer, const=const)


def _points(node) -> tuple[Point, Point]:
    return (node.start_point.row, node.start_point.column), (node.end_point.row, node.end_point.column)


def find_kernels(source: str) -> list[Kernel]:
    """Every `__global__` function definition in the document, in order."""
    kernels: list[Kernel] = []
    for node in _walk(parse(source).root_node):
        if node.type != "function_definition" or not _is_kernel(node):
            continue
        declarator = node.child_by_field_name("declarator")
        while declarator is not None and declarator.type != "function_declarator":
            declarator = declarator.child_by_field_name("declarator")
        body = node.child_by_field_name("body")
        if declarator is None or body is None:
            continue
        name_node = declarator.child_by_field_name("declarator")
        plist = declarator.child_by_field_name("parameters")
        params = tuple(
            p for p in (_param(c) for c in plist.children if c.type == "parameter_declaration") if p is not None
        )
        outer = node.parent if node.parent is not None and node.parent.type == "template_declaration" else node
        start, end = _points(outer)
        body_start, body_end = _points(body)
        kernels.append(Kernel(
            name=name_node.text.decode(),
            start=start,
            end=end,
            params=params,
            body_start=body_start,
            body_end=body_end,
            template=outer is not node,
        ))
    return kernels


def find_kernel(source: str, name: str | None) -> Kernel:
    """The kernel called `name`, or the only one when name is None; ValueError says why not."""
    kernels = find_kernels(source)
    if not kernels:
        raise ValueError("no __global__ function in this file")
    if name is None:
        if len(kernels) > 1:
            names = ", ".join(k.name for k in kernels)
            raise ValueError(f"several kernels ({names}); say which one with --kernel")
        return kernels[0]
    for kernel in kernels:
        if kernel.name == name:
            return kernel
    raise ValueError(f"no __global__ function named {name!r} (found: {', '.join(k.name for k in kernels)})")
