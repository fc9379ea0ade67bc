"""The vendor-compatible `ai8xize.py` command line: parsing, post-processing, tags, errors."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

import needs
from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.commands.izer_args import (
    EFFECTS,
    OPTION_EFFECTS,
    OPTIONS,
    IzerOptions,
    build_parser,
    codegen_only_options_used,
    option_rule_errors,
    parse_izer_args,
)

CORPUS = Path(__file__).parents[2].parent / "shared" / "corpus"
OUT = ["--test-dir", "X", "--prefix", "Y", "--sample-numpy-filename", "Z"]
BASE = ["--config-file", "net.yaml", "--test-dir", "out", "--prefix", "p"]


def case_args(device: str, name: str) -> list[str]:
    path = needs.in_corpus(CORPUS / "cases" / device / name / "case.json")
    return json.loads(path.read_text())["args"]


def parse(*args: str) -> IzerOptions:
    return parse_izer_args([*BASE, *args])


def usage_error(*args: str, base: list[str] | None = None) -> str:
    with pytest.raises(EdgesynthError) as info:
        parse_izer_args([*(BASE if base is None else base), *args])
    return str(info.value)


# ------------------------------------------------------------------------------------------------
# The corpus command lines


def test_every_corpus_command_line_parses():
    cases = sorted(needs.in_corpus(CORPUS / "cases").glob("*/*/case.json"))
    assert len(cases) >= 500
    failures = []
    for path in cases:
        case = json.loads(path.read_text())
        try:
            opts = parse_izer_args([*case["args"], *OUT])
        except EdgesynthError as exc:
            failures.append(f"{path.parent.name}: {exc}")
            continue
        assert opts.device == case["device"], path
        assert (opts.test_dir, opts.prefix, opts.result_numpy) == ("X", "Y", "Z")
    assert not failures, "\n".join(failures)
    assert len(cases) >= 554


def test_cifar10_demo_values():
    opts = parse_izer_args([*case_args("MAX78000", "cifar-10"), *OUT])
    assert opts.device == "MAX78000"
    assert opts.device_spec.code == 85
    assert opts.checkpoint_file == "trained/ai85-cifar10-qat8-q.pth.tar"
    assert opts.config_file == "networks/cifar10-nas.yaml"
    assert opts.sample_input == "tests/sample_cifar-10.npy"
    assert opts.softmax and opts.display_checkpoint and opts.verbose and opts.no_version_check
    assert opts.timer == 0
    assert opts.stop_after is None and opts.start_layer == 0 and opts.no_bias == ()
    assert not opts.fifo and not opts.riscv
    # MAX78000 has neither pipeline nor PLL; embedded code is the default.
    assert (opts.pipeline, opts.pll, opts.embedded_code) == (False, False, True)
    assert opts.enable_delay == 0
    assert opts.c_filename == "main" and opts.result_filename == "sampleoutput.h"
    assert codegen_only_options_used(opts) == ["--softmax", "--timer 0", "--display-checkpoint"]


def test_fast_fifo_quad_implies_fast_fifo_and_fifo():
    opts = parse_izer_args([*case_args("MAX78002", "test-ffsreadahead-multipass"), *OUT])
    assert opts.device == "MAX78002"
    assert opts.checkpoint_file is None
    assert opts.config_file == "tests/test-ffsreadahead-multipass.yaml"
    assert (opts.fast_fifo_quad, opts.fast_fifo, opts.fifo, opts.riscv) == (True,) * 4
    assert (opts.pipeline, opts.pll, opts.enable_delay) == (True, True, 10)
    assert option_rule_errors(opts) == []


def test_max_proc_stop_after_start_layer_and_more():
    opts = parse_izer_args([*case_args("MAX78000", "test-widein-maxproc4"), *OUT])
    assert opts.max_proc == 4
    opts = parse_izer_args([*case_args("MAX78000", "test-eltwiseadd-multipass"), *OUT])
    assert opts.max_proc == 2
    opts = parse_izer_args([*case_args("MAX78000", "test-ai85-mnist80wide-q4"), *OUT])
    assert opts.stop_after == 0
    assert opts.checkpoint_file == "tests/test-mnist-80wide-q4.pth.tar"
    opts = parse_izer_args([*case_args("MAX78002", "test-linklayer-hoparound"), *OUT])
    assert opts.start_layer == 1
    assert option_rule_errors(opts) == []
    opts = parse_izer_args([*case_args("MAX78002", "test-maxkern"), *OUT])
    assert opts.reshape_inputs
    opts = parse_izer_args([*case_args("MAX78002", "test-burnin_16x64x64"), *OUT])
    assert opts.max_count == 4096 and opts.compact_data and opts.mexpress


def test_riscv_debug_implies_riscv_but_not_flash():
    opts = parse_izer_args([*case_args("MAX78000", "mnist-riscv"), *OUT])
    assert opts.riscv and opts.riscv_debug
    # The vendor fills flash/cache from --riscv before the implications: both on here.
    assert opts.riscv_flash and opts.riscv_cache
    opts = parse("--device", "MAX78000", "--riscv-debug")
    assert opts.riscv and not opts.riscv_flash and not opts.riscv_cache
    opts = parse("--device", "MAX78000", "--riscv-exclusive")
    assert opts.riscv
    opts = parse("--device", "MAX78000", "--riscv-cache")
    assert opts.riscv and opts.riscv_flash and opts.riscv_cache
    # As with the vendor, the cache (on by default with --riscv) turns flash back on.
    opts = parse("--device", "MAX78000", "--riscv", "--no-riscv-flash")
    assert opts.riscv and opts.riscv_flash and opts.riscv_cache
    opts = parse("--device", "MAX78000", "--riscv", "--no-riscv-flash", "--no-riscv-cache")
    assert opts.riscv and not opts.riscv_flash and not opts.riscv_cache


# ------------------------------------------------------------------------------------------------
# Values and post-processing


@pytest.mark.parametrize(
    ("spelling", "device"),
    [
        ("MAX78000", "MAX78000"),
        ("max78000", "MAX78000"),
        ("AI85", "MAX78000"),
        ("ai85", "MAX78000"),
        ("85", "MAX78000"),
        ("78000", "MAX78000"),
        ("MAX78002", "MAX78002"),
        ("Ai87", "MAX78002"),
        ("87", "MAX78002"),
    ],
)
def test_device_spellings(spelling, device):
    assert parse("--device", spelling).device == device


def test_ai85_selects_max78000_and_conflicts_with_device():
    assert parse("--ai85").device == "MAX78000"
    message = usage_error("--ai85", "--device", "MAX78002")
    assert "--device" in message and "--ai85" in message


def test_defaults_match_the_vendor():
    opts = parse("--device", "MAX78000")
    assert opts.board_name == "EvKit_V1"
    assert (opts.debugwait, opts.unroll_mlator, opts.unroll_8bit, opts.unroll_wide) == (2, 8, 1, 8)
    assert opts.api_filename == "cnn.c" and opts.weight_filename == "weights.h"
    assert opts.sample_filename == "sampledata.h" and opts.log_filename == "log.txt"
    assert opts.increase_start == 2 and opts.increase_delta1 == opts.increase_delta2 == 0
    assert opts.input_csv_format == 888 and opts.input_csv_retrace == 5
    assert (opts.input_csv_period, opts.input_pix_clk) == (80, 9)
    assert opts.input_split == 1 and opts.synthesize_words == 8 and opts.repeat_layers == 1
    assert opts.version_check_interval == 24 and opts.kernel_format == "{0:4}"
    assert opts.log and opts.unload and opts.mexpress and opts.compact_data
    assert opts.generate_kat and opts.wfi and opts.fifo_wait and opts.verbose_all
    assert opts.display_progress and opts.new_kernel_loader and opts.balance_speed
    assert opts.debug_new_streaming and not opts.compact_weights
    assert opts.define == "" and opts.define_default_arm == "-DMXC_ASSERT_ENABLE -DARM_MATH_CM4"
    assert opts.define_default_riscv == "-DMXC_ASSERT_ENABLE -DRV32"
    assert opts.top_level == "cnn" and opts.autogen is None and opts.yamllint == "yamllint"
    assert opts.timer is None and opts.max_proc is None and opts.clock_divider is None
    pairs = zip(BASE[::2], BASE[1::2], strict=True)
    assert opts.given == (*pairs, ("--device", "MAX78000"))
    assert opts.warnings == ()


def test_aliases():
    assert not parse("--device", "85", "--rtl-sim").embedded_code
    assert not parse("--device", "87", "--apb").pll
    assert parse("--device", "85", "-v", "-L", "-D").verbose
    opts = parse("--device", "85", "--log-last-only")
    assert not opts.verbose_all
    assert parse("--device", "85", "--max-checklines", "12").max_count == 12
    assert parse("--device", "85", "--max-verify-length", "12").max_count == 12
    # Unambiguous prefixes are accepted, as by the vendor's argparse.
    assert parse("--device", "85", "--avg-pool-round").avg_pool_rounding


def test_rtl_mode_changes_file_defaults_and_drops_softmax():
    opts = parse("--device", "85", "--rtl", "--softmax", "--energy")
    assert not opts.embedded_code
    assert opts.c_filename == "test" and opts.result_filename is None
    assert not opts.softmax and not opts.energy
    opts = parse("--device", "85", "--rtl-preload")
    assert not opts.embedded_code and opts.rtl_preload
    opts = parse("--device", "85", "--rtl-preload", "--zero-sram")
    assert not opts.rtl_preload


def test_list_hex_and_pair_values():
    opts = parse(
        "--device",
        "87",
        "--no-bias",
        "1,3",
        "--input-offset",
        "0x2000",
        "--clock-trim",
        "0x173,0x5e,0",
        "--boost",
        "2.5",
        "--streaming-layers",
        "0,0x1",
        "--override-start",
        "0x10",
        "--define",
        "FAST GOOD",
        "--top-level",
        "None",
        "--sample-output-filename",
        "none",
    )
    assert opts.no_bias == (1, 3)
    assert opts.input_offset == 0x2000
    assert opts.clock_trim == (0x173, 0x5E, 0)
    assert opts.boost == (2, 5)
    assert opts.streaming_layers == (0, 1)
    assert opts.override_start == 0x10
    assert opts.define == "-DFAST -DGOOD"
    assert opts.top_level is None and opts.result_filename is None
    all_layers = parse("--device", "87", "--no-bias").no_bias
    assert all_layers == tuple(range(256))
    assert parse("--device", "87", "--no-bias", "--softmax").softmax


def test_timer_rules():
    assert parse("--device", "85", "--timer", "1", "--no-timer").timer is None
    opts = parse("--device", "85", "--timer", "1", "--energy")
    assert opts.timer is None and any("--timer" in w for w in opts.warnings)


def test_mutually_exclusive_pairs():
    for a, b in [
        ("--pipeline", "--no-pipeline"),
        ("--pll", "--no-pll"),
        ("--mexpress", "--no-mexpress"),
        ("--unload", "--no-unload"),
        ("--compact-data", "--no-compact-data"),
        ("--riscv-flash", "--no-riscv-flash"),
        ("--new-kernel-loader", "--old-kernel-loader"),
        ("--rtl", "--rtl-preload"),
        ("--max-speed", "--balance-speed"),
    ]:
        message = usage_error("--device", "87", a, b)
        assert "cannot be combined" in message and a in message and b in message
    assert "cannot be combined" in usage_error(
        "--device", "87", "--max-speed", "--clock-divider", "2"
    )


# ------------------------------------------------------------------------------------------------
# Usage errors


def test_unknown_option_suggests_the_closest():
    message = usage_error("--device", "85", "--softmx")
    assert "unknown option `--softmx`" in message and "`--softmax`" in message
    assert "`--fast-fifo-quad`" in usage_error("--device", "85", "--fast-fifo-qaud")
    assert "`--avg-pool-rounding`" in usage_error("--device", "85", "--avg-pool-roundin=1")
    assert "`--checkpoint-file`" in usage_error("--device", "85", "--checkpointfile", "c.pth")


def test_bad_values_name_the_option_and_the_allowed_values():
    message = usage_error("--device", "MAX78001")
    assert "`--device`" in message and "MAX78000" in message and "MAX78002" in message
    assert "Did you mean" in message
    assert "CMSIS-NN" in usage_error("--device", "cmsis-nn")
    message = usage_error("--device", "85", "--output-width", "16")
    assert "`--output-width`" in message and "8, 32" in message
    message = usage_error("--device", "85", "--timer", "zero")
    assert "`--timer`" in message and "integer" in message
    message = usage_error("--device", "85", "--input-csv-format", "444")
    assert "555, 565, 888" in message
    message = usage_error("--device", "85", "--clock-divider", "3")
    assert "1, 2, 4, 8, 16" in message
    message = usage_error("--device", "85", "--input-offset", "0xzz")
    assert "`--input-offset`" in message and "hexadecimal" in message
    assert "`--no-bias`" in usage_error("--device", "85", "--no-bias", "1,x")
    assert "`--boost`" in usage_error("--device", "85", "--boost", "25")
    assert "`--clock-trim`" in usage_error("--device", "85", "--clock-trim", "1,2")
    assert "`--max-proc`" in usage_error("--device", "85", "--max-proc", "65")


def test_missing_values_and_required_options():
    message = usage_error("--device")
    assert "`--device`" in message and "needs a value" in message and "MAX78002" in message
    message = usage_error("--device", "85", "--stop-after")
    assert "`--stop-after`" in message and "integer" in message
    message = usage_error("--config-file", "n.yaml", base=[])
    assert "--test-dir" in message and "--prefix" in message
    message = usage_error(base=BASE)
    assert "--device" in message


def test_flag_with_a_value():
    assert "takes no value" in usage_error("--device", "85", "--softmax", "yes")
    assert "takes no value" in usage_error("--device", "85", "--softmax=yes")


def test_ambiguous_prefix():
    message = usage_error("--device", "85", "--fast")
    assert "ambiguous" in message and "--fast-fifo" in message


def test_help_exits_zero(capsys):
    with pytest.raises(SystemExit) as info:
        parse_izer_args(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--avg-pool-rounding" in out and "--fast-fifo-quad" in out


# ------------------------------------------------------------------------------------------------
# Option tags


def test_every_option_is_tagged_and_in_the_dataclass():
    parser = build_parser()
    strings = {s for a in parser._actions for s in a.option_strings} - {"-h", "--help"}
    assert strings == set(OPTION_EFFECTS)
    assert set(OPTION_EFFECTS.values()) <= set(EFFECTS)
    assert {o.dest for o in OPTIONS} == {f.name for f in fields(IzerOptions)} - {
        "given",
        "warnings",
        "write_for_write",
    }


def test_selected_tags():
    for option in [
        "--avg-pool-rounding",
        "--legacy-test",
        "--stop-after",
        "--no-bias",
        "--sample-input",
        "--config-file",
        "--checkpoint-file",
        "--device",
        "--ai85",
        "--start-layer",
        "--reshape-inputs",
        "--output-width",
    ]:
        assert OPTION_EFFECTS[option] == "sim", option
    for option in [
        "--softmax",
        "--timer",
        "--riscv",
        "--mexpress",
        "--no-wfi",
        "--compact-data",
        "--max-checklines",
        "--debug-snoop",
        "--display-checkpoint",
        "--simple1b",  # a register bit: the known answer does not change
        "--fixed-input",  # changes the C input loader only
    ]:
        assert OPTION_EFFECTS[option] == "codegen", option
    for option in ["--fifo", "--fast-fifo", "--max-proc", "--read-ahead", "--pipeline"]:
        assert OPTION_EFFECTS[option] == "rules", option
    for option in [
        "--verbose",
        "-v",
        "--no-version-check",
        "--test-dir",
        "--prefix",
        "--sample-numpy-filename",
    ]:
        assert OPTION_EFFECTS[option] == "run", option


def test_codegen_note_lists_each_option_once_as_typed():
    opts = parse(
        "--device",
        "85",
        "-v",
        "--no-wfi",
        "--timer",
        "0",
        "--mexpress",
        "--no-wfi",
        "--fifo",
        "--stop-after",
        "2",
    )
    assert codegen_only_options_used(opts) == ["--no-wfi", "--timer 0", "--mexpress"]
    assert opts.was_given("--verbose") and not opts.was_given("--softmax")


# ------------------------------------------------------------------------------------------------
# Option-only device rules


def test_option_rule_errors():
    def messages(*args: str) -> str:
        return " ".join(str(e) for e in option_rule_errors(parse(*args)))

    assert messages("--device", "85") == ""
    assert "--fast-fifo" in messages("--device", "85", "--fast-fifo")
    assert messages("--device", "85", "--fast-fifo", "--riscv") == ""
    assert "--start-layer" in messages("--device", "85", "--start-layer", "1")
    assert "--pipeline" in messages("--device", "85", "--pipeline")
    assert "--read-ahead" in messages("--device", "85", "--read-ahead")
    assert messages("--device", "87", "--read-ahead", "--calcx4") == ""
    assert "--max-speed" in messages("--device", "85", "--max-speed")
    assert messages("--device", "87", "--max-speed") == ""
    assert "--deepsleep" in messages("--device", "87", "--deepsleep")
    assert "--synthesize-input" in messages("--device", "87", "--synthesize-input", "0x112233")
    assert "--timer" in messages("--device", "87", "--one-shot", "--timer", "0")
