"""XN* commands: the ml-suite command list (`.cmd`) and compiler output (`.json`) forms.

A command is an id, an operation (`XNConv`, `XNMaxPool`, ...) and named fields. ml-suite wrote
them in several layouts over its versions: the long form (`kernel_w kernel_h ...`, what the
compiler JSON's `xdnn_instr` and the `# template` comment lines list), a short form with one
value for square sizes (`kernel strides ... insize ...`, what `googlenet_v1_28.cmd` holds), with
or without a trailing `Bypass_Perf_Opt`, and longer forms with replication and tiling fields.
The field names and orders below are the ones ml-suite's templates and `xdnn_kv` dictionaries
use; a `# template` line in a file adds its layout. A line is read with the first layout whose
field count and field kinds (name, number, address) fit; nothing is guessed beyond that.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgesynth.errors import EdgesynthError

Value = int | str


def _names(text: str) -> list[str]:
    return text.split()


# -- layouts --------------------------------------------------------------------------------
_CONV_LONG = _names(
    "name kernel_w kernel_h strides_w strides_h padding_w padding_h dilation_w dilation_h "
    "preshift scale postshift relu bias inaddr insize_w insize_h inchan outaddr outsize_w "
    "outsize_h outchan"
)
_CONV_SHORT = _names(
    "name kernel strides preshift scale postshift relu bias inaddr insize inchan outaddr "
    "outsize outchan"
)
_POOL_LONG = _names(
    "name kernel_w kernel_h strides_w strides_h paddings_w paddings_h inaddr insize_w insize_h "
    "inchan outaddr outsize_w outsize_h"
)
_POOL_SHORT = _names("name kernel strides paddings inaddr insize inchan outaddr outsize")
_AVG_LONG = [*_POOL_LONG[:7], "fcmode", *_POOL_LONG[7:]]
_AVG_SHORT = [*_POOL_SHORT[:4], "fcmode", *_POOL_SHORT[4:]]
_ELT_LONG = _names("name add bn relu inaddrA inaddrB insize_w insize_h inchan outaddr")
_ELT_SHORT = _names("name add bn relu inaddrA inaddrB insize inchan outaddr")
_GATHER = _names("uram_dest ddr_src insize_w insize_h inchan a0 b1 c1 start_row end_row")
_SCATTER = _names("uram_src ddr_dest outsize_w outsize_h outchan a0 b1 c1 start_row end_row")
_REPL = _names("full_sect_num repl_sect_num repl_unit_num repl_unit_width")
_CONVP_POOL = _names(
    "pool_kernel_w pool_kernel_h pool_strides_w pool_strides_h pool_paddings_w pool_paddings_h "
    "pool_fcmode"
)
_CONVP_POOL_IO = _names(
    "pool_inaddr pool_insize_w pool_insize_h pool_inchan pool_outaddr pool_outsize_w pool_outsize_h"
)
_BYPASS = "Bypass_Perf_Opt"


def _with_bypass(*layouts: list[str]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for lay in layouts:
        out += [(*lay, _BYPASS), tuple(lay)]
    return out


LAYOUTS: dict[str, list[tuple[str, ...]]] = {
    "XNConv": _with_bypass(_CONV_LONG, _CONV_SHORT),
    "XNConvDepth": _with_bypass(_CONV_LONG, _CONV_SHORT),
    "XNDeconv": _with_bypass(_CONV_LONG, _CONV_SHORT),
    "XNConvP": [
        (*_CONV_LONG, _BYPASS, *_CONVP_POOL, *_CONVP_POOL_IO),
        (*_CONV_LONG, _BYPASS, *_CONVP_POOL),
    ],
    "XNMaxPool": [*_with_bypass(_POOL_LONG, _POOL_SHORT), (*_POOL_LONG[1:], _BYPASS)],
    "XNAvgPool": [*_with_bypass(_AVG_LONG, _AVG_SHORT), (*_AVG_LONG[1:], _BYPASS)],
    "XNEltwise": _with_bypass(_ELT_LONG, _ELT_SHORT),
    "XNGather": [
        (*_GATHER, "slice", *_REPL, "srcAddrReadFromImgQ"),
        (*_GATHER, "slice", "srcAddrReadFromImgQ"),
        (*_GATHER, "slice"),
        tuple(_GATHER),
    ],
    "XNScatter": [
        (*_SCATTER, "slice", *_REPL, "destAddrReadFromImgQ"),
        (*_SCATTER, "slice", "destAddrReadFromImgQ"),
        (*_SCATTER, "slice"),
        tuple(_SCATTER),
    ],
    "XNUpload": [("inaddr", "insize", "inchan")],
    "XNThroughputInterbuf": [("name",)],
}
ALIASES = {"XNEltWise": "XNEltwise"}  # the template comment of googlenet_v1_28.cmd
# ml-suite's template placeholder names -> the compiler JSON's field names
_TEMPLATE_NAMES = {"layername": "name", "input_w": "insize_w", "input_h": "insize_h"}
_TEMPLATE_LITERALS = {0: "a0", 1: "b1", 2: "c1"}  # the `0 1 1` of the Gather/Scatter templates

_NAME_FIELDS = {"name", "conv_name"}


def _is_address(name: str) -> bool:
    n = name.lower()
    return "addr" in n or n.startswith(("uram_", "ddr_"))


def parse_int(text: str) -> int:
    """A decimal or 0x-hexadecimal integer (ValueError otherwise)."""
    t = text.strip()
    return int(t, 16) if t.lower().startswith(("0x", "-0x")) else int(t, 10)


def _convert(name: str, token: str) -> Value:
    if name in _NAME_FIELDS:
        try:
            parse_int(token)
        except ValueError:
            return token
        raise ValueError("a name, not a number")
    return parse_int(token)


def _fit(layout: Sequence[str], tokens: Sequence[str]) -> dict[str, Value] | None:
    if len(layout) != len(tokens):
        return None
    try:
        return {name: _convert(name, tok) for name, tok in zip(layout, tokens, strict=True)}
    except ValueError:
        return None


# -- the command ----------------------------------------------------------------------------
@dataclass
class Command:
    id: int
    op: str
    fields: dict[str, Value]
    comment: str = ""  # the text after `#` on the line
    line: int = 0  # 1-based line in the source file (0: made in memory)
    layout: str = ""  # which layout read it

    def get(self, key: str, default: Value | None = None) -> Value | None:
        """A field by its long-form name; short-form square values answer for _w and _h."""
        if key in self.fields:
            return self.fields[key]
        for suffix in ("_w", "_h"):
            if key.endswith(suffix) and key[: -len(suffix)] in self.fields:
                return self.fields[key[: -len(suffix)]]
        return default

    def int(self, key: str) -> int:
        v = self.get(key)
        if not isinstance(v, int):
            raise EdgesynthError(f"command {self.id} {self.op} has no numeric field `{key}`")
        return v

    @property
    def name(self) -> str:
        return str(self.fields.get("name", ""))

    def format(self) -> str:
        """The command as one line: id, op, the field values (addresses in hex)."""
        parts = [str(self.id), self.op]
        for key, v in self.fields.items():
            parts.append(hex(v) if isinstance(v, int) and _is_address(key) else str(v))
        text = " ".join(parts)
        return f"{text} # {self.comment}" if self.comment else text


@dataclass
class Note:
    """A comment line that names an operation ml-suite did not emit as a command (`XNConcat`,
    a commented-out `XNInner`, an input that could not be downloaded)."""

    line: int
    text: str
    op: str = ""
    id: int | None = None


@dataclass
class CommandList:
    commands: list[Command]
    notes: list[Note] = field(default_factory=list)
    templates: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    source: str = ""


# -- .cmd files ------------------------------------------------------------------------------
_TEMPLATE = re.compile(r"^#\s*template\s+(.*)$")
_NOTE_OP = re.compile(r"^#+\s*(?:#+\s*)?(\d+)\s+(XN\w+)\b")


def parse_template(text: str) -> tuple[str | None, tuple[str, ...]]:
    """`# template` line -> (op or None, field names after id and op)."""
    words = [w.strip("<>") for w in text.split()]
    op: str | None = None
    if words and words[0].startswith("XN"):  # "XNAvgPool id XNOp name ..."
        op = words.pop(0)
    names: list[str] = []
    seen_id = seen_op = False
    literal = 0
    for w in words:
        if not seen_id and w == "id":
            seen_id = True
            continue
        if not seen_op and (w == "XNOp" or (w.startswith("XN") and op is None)):
            seen_op = True
            if w != "XNOp":
                op = w
            continue
        if re.fullmatch(r"-?\d+", w):
            names.append(_TEMPLATE_LITERALS.get(literal, f"const{literal}"))
            literal += 1
            continue
        names.append(_TEMPLATE_NAMES.get(w, w))
    return (ALIASES.get(op, op) if op else None), tuple(names)


def parse_cmd(text: str, source: str = "<cmd>") -> CommandList:
    """Read a `.cmd` command list. Malformed lines are refused with their line number."""
    lines = text.splitlines()
    templates: dict[str, list[tuple[str, ...]]] = {}
    generic: list[tuple[str, ...]] = []
    for raw in lines:
        m = _TEMPLATE.match(raw.strip())
        if m:
            op, names = parse_template(m.group(1))
            (templates.setdefault(op, []) if op else generic).append(names)
    out = CommandList([], [], templates, source)
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if _TEMPLATE.match(line):
                continue
            m = _NOTE_OP.match(line)
            note = Note(number, line.lstrip("# ").rstrip())
            if m:
                note.id, note.op = int(m.group(1)), m.group(2)
            out.notes.append(note)
            continue
        out.commands.append(parse_line(line, number, source, templates, generic))
    return out


def parse_line(
    line: str,
    number: int = 0,
    source: str = "<cmd>",
    templates: dict[str, list[tuple[str, ...]]] | None = None,
    generic: Sequence[tuple[str, ...]] = (),
) -> Command:
    body, _, comment = line.partition("#")
    tokens = body.split()
    where = {"file": source, "line": number or None}
    if len(tokens) < 2:
        raise EdgesynthError(f"a command needs an id and an operation: {line!r}", **where)
    try:
        cid = parse_int(tokens[0])
    except ValueError:
        raise EdgesynthError(
            f"the command id must be a number, not {tokens[0]!r}", **where
        ) from None
    op = ALIASES.get(tokens[1], tokens[1])
    candidates = [*(templates or {}).get(op, []), *LAYOUTS.get(op, []), *generic]
    if not candidates:
        known = ", ".join(sorted(LAYOUTS))
        raise EdgesynthError(f"unknown operation {tokens[1]!r}; known: {known}", **where)
    values = tokens[2:]
    for layout in candidates:
        fields = _fit(layout, values)
        if fields is not None:
            kind = "long" if len(layout) > 15 or "kernel_w" in layout else "short"
            return Command(cid, op, fields, comment.strip(), number, kind)
    for layout in (templates or {}).get(op, []):  # a file's template may list more fields
        if len(layout) > len(values):  # than its lines carry: read the leading ones
            fields = _fit(layout[: len(values)], values)
            if fields is not None:
                missing = " ".join(layout[len(values) :])
                note = f"{comment.strip()}; " if comment.strip() else ""
                return Command(
                    cid,
                    op,
                    fields,
                    f"{note}template fields absent: {missing}",
                    number,
                    "template-prefix",
                )
    counts = sorted({len(lay) for lay in candidates})
    raise EdgesynthError(
        f"{op} with {len(values)} fields fits no known layout (layouts of "
        f"{', '.join(map(str, counts))} fields, names and numbers in their places)",
        **where,
    )


# -- ml-suite compiler JSON ------------------------------------------------------------------
_KV_SKIP = {"id", "XNOp", "comment", "sep"}


def command_from_json_layer(layer: dict[str, Any], index: int, source: str) -> Command | None:
    """One `network[]` entry of a compiler JSON as a Command (None for entries without one,
    such as a Concat that ml-suite wrote as a comment)."""
    instr = str(layer.get("xdnn_instr") or "")
    body = instr.split("#", 1)[0].split()
    kv = layer.get("xdnn_kv") or {}
    where = {"file": source, "layer": index, "layer_name": str(layer.get("name", ""))}
    if not isinstance(kv, dict):
        raise EdgesynthError("xdnn_kv must be an object", **where)
    if not body and "XNOp" in kv:  # later ml-suite versions keep only the named fields
        try:
            cid = parse_int(str(kv["id"])) if "id" in kv else 0  # 0: ml-suite gave no id
        except ValueError:
            raise EdgesynthError(
                f"xdnn_kv `id` must be a number, not {kv['id']!r}", **where
            ) from None
        fields = {k: _json_value(k, str(v)) for k, v in kv.items() if k not in _KV_SKIP}
        return Command(cid, str(kv["XNOp"]), fields, str(kv.get("comment", "")), 0, "kv")
    if len(body) < 2 or not body[1].startswith("XN"):
        return None
    ordered = layer.get("xdnn_list")
    if ordered:  # ml-suite's own ordered (name, value) pairs
        pairs = [(str(k), str(v)) for k, v in ordered]
        values = [v for _, v in pairs]
        # the pairs must give every token of the instruction; only the operation name may
        # differ (ml-suite wrote `XNConv` in the instruction of some fused pool commands)
        if len(values) != len(body) or values[:1] + values[2:] != body[:1] + body[2:]:
            raise EdgesynthError("xdnn_list does not match xdnn_instr", **where)
        fields = {k: _json_value(k, v) for k, v in pairs[2:]}
        note = _comment(instr)
        if values[1] != body[1]:
            note = f"xdnn_instr says {body[1]}" + (f"; {note}" if note else "")
        return Command(parse_int(body[0]), values[1], fields, note, 0, "list")
    try:
        cmd = parse_line(instr, 0, source)
    except EdgesynthError:
        cmd = None
    if cmd is not None:
        for k, v in kv.items():
            if k in _KV_SKIP:
                continue
            if k in cmd.fields and str(cmd.fields[k]) != str(_json_value(k, str(v))):
                raise EdgesynthError(
                    f"xdnn_kv `{k}` = {v} but xdnn_instr has {cmd.fields[k]}", **where
                )
        return cmd
    if not kv:
        raise EdgesynthError(f"cannot read xdnn_instr {instr!r} (no layout fits)", **where)
    # No known layout: the fields are named by xdnn_kv; they must account for every token.
    named = {k: str(v) for k, v in kv.items() if k not in _KV_SKIP}
    if sorted(named.values()) != sorted(body[2:]):
        raise EdgesynthError("xdnn_kv and xdnn_instr disagree", **where)
    fields = {k: _json_value(k, v) for k, v in named.items()}
    return Command(parse_int(body[0]), body[1], fields, _comment(instr), 0, "kv")


def _comment(instr: str) -> str:
    return instr.split("#", 1)[1].strip() if "#" in instr else ""


def _json_value(name: str, text: str) -> Value:
    try:
        return parse_int(text)
    except ValueError:
        return text


def parse_compiler_json(data: dict[str, Any], source: str = "<json>") -> CommandList:
    """The commands of an ml-suite compiler output (`network[].xdnn_instr` / `xdnn_kv`)."""
    network = data.get("network")
    if not isinstance(network, list):
        raise EdgesynthError("not an xDNN compiler output: no `network` list", file=source)
    if network and all(isinstance(x, dict) and "prescale_shift" in x for x in network):
        raise EdgesynthError(
            "this is a quantization file, not a program: use `edgesynth xdnn check-quant`",
            file=source,
        )
    out = CommandList([], [], {}, source)
    for i, layer in enumerate(network):
        if not isinstance(layer, dict):
            raise EdgesynthError("network entries must be objects", file=source, layer=i)
        cmd = command_from_json_layer(layer, i, source)
        if cmd is not None:
            out.commands.append(cmd)
        elif layer.get("xdnn_instr"):
            out.notes.append(Note(i, str(layer["xdnn_instr"]).strip("# ").strip()))
    return out


def read_program(path: Path) -> CommandList:
    """A `.cmd` command list or a compiler `.json`, by content."""
    try:
        text = Path(path).read_text()
    except UnicodeDecodeError:
        raise EdgesynthError(
            "not a text file (a script image? try script.bin)", file=str(path)
        ) from None
    except OSError as err:
        raise EdgesynthError(f"cannot read: {err.strerror or err}", file=str(path)) from None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as err:
            raise EdgesynthError(f"invalid JSON: {err}", file=str(path)) from None
        return parse_compiler_json(data, str(path))
    return parse_cmd(text, str(path))


def describe(commands: Iterable[Command]) -> str:
    """Every command, one per block, each field by name."""
    lines: list[str] = []
    for c in commands:
        where = f"  (line {c.line})" if c.line else ""
        lines.append(f"{c.id} {c.op}{where}")
        for k, v in c.fields.items():
            shown = hex(v) if isinstance(v, int) and _is_address(k) else v
            lines.append(f"    {k:<24} {shown}")
    return "\n".join(lines)
