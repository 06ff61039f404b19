"""The ``%advise`` line magic and its ``%config Advisor.*`` settings.

Loading the extension registers the magic and nothing else: torch, pandas, ipywidgets and
altair are imported when ``%advise`` first runs. Errors raised on purpose by aiadvisor (and bad
arguments) are shown as a short ``UsageError`` without a traceback; the Python API
(``aiadvisor.advise``) keeps the traceback.
"""

from __future__ import annotations

import contextlib
import keyword
from collections.abc import Iterator
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.process import arg_split
from traitlets import Bool, CaselessStrEnum, Float, Integer, TraitError, Unicode

from .errors import AIAdvisorError, InvalidArgumentError, close_matches
from .units import ADVISE_MODES, MODES, PRECISIONS

__all__ = ["Advisor", "ConfigValueError", "load_ipython_extension", "unload_ipython_extension"]


class ConfigValueError(InvalidArgumentError, TraitError):
    """A ``%config Advisor.<name> = value`` that the setting cannot take.

    Also a ``TraitError``, so traitlets rolls the setting back as it does for its own errors;
    ``%config`` shows the message.
    """


class _Checked:
    """Mixin for a setting: a bad value raises :class:`ConfigValueError` naming the setting,
    the value, what was expected and the choices (traitlets' own message names no choices)."""

    def __init__(self, *args: Any, expected: str, **kwargs: Any) -> None:
        self.expected = expected
        super().__init__(*args, **kwargs)

    def validate(self, obj: Any, value: Any) -> Any:
        try:
            return super().validate(obj, value)
        except ConfigValueError:
            raise
        except TraitError:
            raise ConfigValueError(self.message(value)) from None

    def message(self, value: Any, hint: str = "") -> str:
        return (f"Advisor.{self.name}={value!r} is not valid: expected {self.expected}."
                f"{hint or self.hint(value)}")

    def hint(self, value: Any) -> str:
        return ""


class CheckedInt(_Checked, Integer):
    """An integer setting; a bool or a quoted number is refused, not coerced."""

    def validate(self, obj: Any, value: Any) -> Any:
        if isinstance(value, bool):  # bool is an int subclass: True would mean 1 device
            raise ConfigValueError(self.message(value))
        return super().validate(obj, value)

    def hint(self, value: Any) -> str:
        if isinstance(value, str) and value.strip().isdigit():
            return f" Did you mean {value.strip()} (a number, without quotes)?"
        return ""


class CheckedFloat(_Checked, Float):
    """A number in a range (``low < value`` or ``low <= value``, ``value <= high``); a bool or
    a quoted number is refused, not coerced."""

    def __init__(self, *args: Any, low: float, high: float | None = None,
                 low_inclusive: bool = False, **kwargs: Any) -> None:
        self.low, self.high, self.low_inclusive = low, high, low_inclusive
        super().__init__(*args, **kwargs)

    def validate(self, obj: Any, value: Any) -> Any:
        if isinstance(value, bool):
            raise ConfigValueError(self.message(value))
        value = super().validate(obj, value)
        above = value >= self.low if self.low_inclusive else value > self.low
        if not (above and (self.high is None or value <= self.high)) or value != value:
            raise ConfigValueError(self.message(value))
        return value

    def hint(self, value: Any) -> str:
        try:
            float(str(value).strip())
        except ValueError:
            return ""
        return (f" Did you mean {str(value).strip()} (a number, without quotes)?"
                if isinstance(value, str) else "")


class CheckedEnum(_Checked, CaselessStrEnum):
    """One of a few names, any case (stored as listed); a near miss is suggested."""

    def hint(self, value: Any) -> str:
        match = close_matches(str(value), [v for v in self.values if v], n=1)
        return f" Did you mean {match[0]!r}?" if match else ""


class CheckedBool(_Checked, Bool):
    """True or False; the strings 'True'/'False' are refused with the unquoted fix."""

    def hint(self, value: Any) -> str:
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return f" Did you mean {value.strip().capitalize()} (without quotes)?"
        return ""


class HardwareName(_Checked, Unicode):
    """A catalog name, checked against the catalog when set (``"local"`` and ``""`` too)."""

    def validate(self, obj: Any, value: Any) -> Any:
        value = super().validate(obj, value)
        if value and value.lower() != "local":
            from .hardware import get

            try:
                get(value)
            except AIAdvisorError as exc:  # UnknownHardwareError names the closest rows
                raise ConfigValueError(self.message(value, f" {exc}")) from None
        return value


def _fabric(text: str | None) -> str | dict | None:
    if text is None:
        return None
    from .hardware.fabrics import fabric_from_text

    return fabric_from_text(text)


def _choices(values: tuple[str, ...]) -> str:
    return "one of " + ", ".join(map(repr, values))

_OPTIONS = ("--mode", "--batch", "--seq", "--hardware", "--devices", "--precision", "--insert",
            "--verify", "--fabric", "--node-size", "--verify-plan")


@magics_class
class Advisor(Magics):
    """``%advise MODEL INPUTS``: profile a model and show the advice dashboard.

    Settings (``%config Advisor.<name> = value``) give the defaults used when an option is not
    on the ``%advise`` line. A value a setting cannot take, or a name that is not a setting,
    is refused with a :class:`ConfigValueError` naming the setting, the value, what was expected
    and the choices (``%config`` shows it as an error line; the setting keeps its value).
    """

    default_mode = CheckedEnum(ADVISE_MODES, default_value="train", config=True,
                           expected=_choices(ADVISE_MODES),
                           help="Mode used when --mode is not given: 'train', 'infer' or "
                                "'generate' (LLM serving).")
    default_hardware = HardwareName("", config=True,
                                     expected="a catalog name (e.g. 'NVIDIA H100 SXM'), 'local' "
                                              "or '' (the attached device)",
                                     help="Catalog name used when --hardware is not given "
                                          "('' lets the advisor choose).")
    default_devices = CheckedInt(None, min=1, allow_none=True, config=True,
                             expected="an integer >= 1, or None (let the advisor choose)",
                             help="Number of devices used when --devices is not given "
                                  "(None lets the advisor choose).")
    default_precision = CheckedEnum(("", *PRECISIONS), default_value="", config=True,
                                expected=_choices(PRECISIONS) + " or '' (let the advisor "
                                         "choose)",
                                help="Precision used when --precision is not given "
                                     "('' lets the advisor choose).")
    price_basis = CheckedEnum(("rent", "own"), default_value="rent", config=True,
                              expected=_choices(("rent", "own")),
                              help="How the hardware ranking prices a device-hour: 'rent' (the "
                                   "rental price where there is one) or 'own' (the purchase "
                                   "price amortised as price_years/price_utilisation/"
                                   "price_usd_per_kwh say, where there is one).")
    price_years = CheckedFloat(3.0, low=0.0, config=True, expected="a number of years > 0",
                               help="Years over which a purchase is written off.")
    price_utilisation = CheckedFloat(0.5, low=0.0, high=1.0, config=True,
                                     expected="a fraction > 0 and <= 1",
                                     help="Share of the hours an owned device is busy.")
    price_usd_per_kwh = CheckedFloat(0.15, low=0.0, low_inclusive=True, config=True,
                                     expected="a price in USD per kWh >= 0",
                                     help="Electricity price for owned devices (0: leave "
                                          "power out).")
    widgets = CheckedBool(True, config=True, expected="True or False",
                    help="Show the interactive dashboard where the front end runs widgets; "
                         "False always shows the static report (HTML and text).")
    offline_charts = CheckedEnum(("auto", "always", "never"), default_value="auto", config=True,
                             expected=_choices(("auto", "always", "never")),
                             help="Bundle the chart library into the page (needs "
                                  "vl-convert-python) instead of loading it from a CDN. "
                                  "'auto': when vl-convert is installed.")

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.last_view: Any = None
        """The last dashboard (or report) shown; ``--insert`` reads its current report."""
        self.last_call: tuple[str, str, dict[str, Any]] | None = None
        """(model name, inputs name, options) of the last ``%advise``: what ``--verify`` re-runs."""
        self.last_verification: Any = None
        """The last ``--verify`` result (:class:`aiadvisor.verification.Verification`)."""

    def update_config(self, config: Any) -> None:
        """``%config Advisor.<name> = value``: an unknown name is an error, not a warning."""
        section = dict.get(config, "Advisor")  # dict.get: Config would create the section
        names = sorted(self.trait_names(config=True))
        for name in section or ():
            if name not in names:
                guess = f"default_{name}" if f"default_{name}" in names else None
                hint = guess or next(iter(close_matches(name, names, n=1)), None)
                fix = f" Did you mean {hint!r}?" if hint else ""
                raise ConfigValueError(f"Advisor has no setting {name!r}: expected one of "
                                       f"{', '.join(map(repr, names))}.{fix}")
        super().update_config(config)

    @magic_arguments()
    @argument("model", nargs="?", help="Name of the torch.nn.Module in the notebook.")
    @argument("inputs", nargs="?",
              help="Name of an example batch: a tensor, a tuple of arguments or a dict of "
                   "keyword arguments.")
    @argument("--mode", help="'train' (forward, backward, optimizer), 'infer', or 'generate' "
              "(a causal LM's serving: prefill, decode, KV cache; adds the Serving tab).")
    @argument("--batch", type=int, metavar="N", help="Batch size to advise for (default: the "
              "example's).")
    @argument("--seq", type=int, metavar="N", help="Sequence length to advise for (default: the "
              "example's).")
    @argument("--hardware", metavar="NAME", help='Target device, e.g. "NVIDIA H100 SXM".')
    @argument("--devices", type=int, metavar="N", help="Number of devices to plan for.")
    @argument("--fabric", metavar="NAME", help='Network between nodes: a fabric name, e.g. '
              '"InfiniBand NDR 400G", "RoCE 400G", "p5", or a number (NIC Gb/s per device). '
              "Default: the device's usual build.")
    @argument("--node-size", type=int, metavar="N", dest="node_size",
              help="Devices per node (--devices must fill whole nodes).")
    @argument("--precision", metavar="P", help=f"One of {', '.join(PRECISIONS)}.")
    @argument("--insert", metavar="N",
              help="Insert the code of recommendation N (its number, or its id) of the last "
                   "report in a new cell below.")
    @argument("--verify", action="store_true",
              help="Re-measure the last %%advise model (or MODEL INPUTS) on the attached device "
                   "and show predicted vs measured step time and peak memory.")
    @argument("--verify-plan", action="store_true",
              help="Apply the last report's plan step by step to copies of its model on the "
                   "attached device and show predicted vs measured speedup per step.")
    @line_magic
    def advise(self, line: str = "") -> None:
        """Profile a model on an example batch and show where its time and memory go.

        Shows a dashboard with the profile, a hardware ranking, precision and parallelism
        plans, and recommendations whose code one click inserts below. Batch size, sequence
        length, device count and precision can be changed in the dashboard without re-running
        the model. Every speed, memory and cost figure is an estimate from aiadvisor's cost
        model unless it says it was measured.

        Examples
        --------
        ::

            %advise model x
            %advise model batch --mode infer --hardware "NVIDIA H100 SXM" --devices 8
            %advise llm input_ids --mode generate --hardware "NVIDIA L4"   # serving
            %advise --insert 2          # code of recommendation 2 in a new cell below
            %advise --verify --precision bf16   # after applying bf16 autocast: measure it
            %advise --verify-plan       # the last plan, applied and timed step by step
            %config Advisor.default_mode = "infer"

        ``--verify`` closes the loop: it re-runs the last ``%advise`` model (looked up by name
        again, so a redefined model counts) for real on the attached device, and shows the
        cost model's prediction for that device (benchmarked once, then cached) beside the
        measured step time and peak memory. ``--mode`` and ``--precision`` say how the step
        runs now.
        """
        args = _parse(self.advise, line)
        with _short_errors():
            if args.verify_plan:
                self._verify_plan()
                return
            if args.verify:
                self._verify(args)
                return
            if args.insert is not None:
                self._insert(args.insert)
                return
            self._advise(args)

    # --- sub-commands ---------------------------------------------------------------
    def _advise(self, args: Any) -> None:
        if args.model is None or args.inputs is None:
            raise UsageError("%advise needs a model and an example batch, e.g. `%advise model x`."
                             " See `%advise?`.")
        model = self._lookup(args.model, "MODEL")
        inputs = self._lookup(args.inputs, "INPUTS")
        options = self._options(args)
        from .widgets.show import show_advice

        self.last_view = show_advice(
            model, inputs, options=options, shell=self.shell, use_widgets=self._use_widgets(),
            offline_charts=self.offline_charts,
        )
        self.last_call = (args.model, args.inputs, options)

    def _verify(self, args: Any) -> None:
        if args.insert is not None:
            raise UsageError("--verify and --insert are separate commands: run one at a time.")
        for flag, value in (("--batch", args.batch), ("--seq", args.seq),
                            ("--hardware", args.hardware), ("--devices", args.devices),
                            ("--fabric", args.fabric), ("--node-size", args.node_size)):
            if value is not None:
                raise UsageError(f"--verify measures the example batch on the attached device: "
                                 f"{flag} does not apply.")
        if args.model is not None:
            if args.inputs is None:
                raise UsageError("%advise MODEL INPUTS --verify needs the example batch too.")
            model_name, inputs_name, last = args.model, args.inputs, {}
        elif self.last_call is not None:
            model_name, inputs_name, last = self.last_call
        else:
            raise UsageError("Nothing to verify yet: run `%advise MODEL INPUTS` first (or "
                             "`%advise MODEL INPUTS --verify`).")
        model = self._lookup(model_name, "MODEL")
        inputs = self._lookup(inputs_name, "INPUTS")
        mode = args.mode or last.get("mode") or self.default_mode
        if mode == "generate":  # what runs for real is the prompt forward: an inference step
            mode = "infer"
        if mode not in MODES:
            raise UsageError(_choice_message("--mode", mode, MODES))
        precision = (args.precision or last.get("precision") or self.default_precision
                     or "fp32").lower()
        if precision not in PRECISIONS:
            raise UsageError(_choice_message("--precision", precision, PRECISIONS))
        from IPython.display import display

        from .verification import verify

        result = verify(model, inputs, mode=mode, precision=precision, model_name=model_name)
        self.last_verification = result
        display({"text/html": result._repr_html_(), "text/plain": str(result)}, raw=True)

    def _verify_plan(self) -> None:
        report = getattr(self.last_view, "report", self.last_view)
        if report is None or self.last_call is None:
            raise UsageError("There is no plan yet: run `%advise MODEL INPUTS --hardware local` "
                             "first.")
        model_name, inputs_name, _ = self.last_call
        from IPython.display import display

        from .verification import verify_plan

        result = verify_plan(self._lookup(model_name, "MODEL"),
                             self._lookup(inputs_name, "INPUTS"), report)
        self.last_verification = result
        display({"text/html": result._repr_html_(), "text/plain": str(result)}, raw=True)

    def _insert(self, which: str) -> None:
        report = getattr(self.last_view, "report", self.last_view)
        if report is None:
            raise UsageError("There is no report yet: run `%advise MODEL INPUTS` first.")
        rec, number = _pick_recommendation(report.recommendations, which)
        self.shell.set_next_input(rec.code, replace=False)
        print(f"Inserted recommendation {number} ({rec.title}) in a new cell below.")

    # --- helpers --------------------------------------------------------------------
    def _lookup(self, name: str, role: str) -> Any:
        user_ns = self.shell.user_ns
        head, *attrs = name.split(".")
        if not all(part.isidentifier() and not keyword.iskeyword(part) for part in [head, *attrs]):
            raise UsageError(f"{role} must be the name of a variable in the notebook, got "
                             f"{name!r}. Assign it first, e.g. `x = ...`, then `%advise model x`.")
        if head not in user_ns:
            hidden = getattr(self.shell, "user_ns_hidden", {})
            visible = [k for k in user_ns if not k.startswith("_") and k not in hidden]
            hint = close_matches(head, visible, n=1)
            fix = f" Did you mean {hint[0]!r}?" if hint else ""
            raise UsageError(f"{role} {head!r} is not defined in the notebook.{fix}")
        value = user_ns[head]
        for i, attr in enumerate(attrs):
            if not hasattr(value, attr):
                owner = ".".join([head, *attrs[:i]])
                raise UsageError(f"{role} {name!r}: {owner!r} has no attribute {attr!r}.")
            value = getattr(value, attr)
        return value

    def _options(self, args: Any) -> dict[str, Any]:
        mode = args.mode if args.mode is not None else self.default_mode
        if mode not in ADVISE_MODES:
            raise UsageError(_choice_message("--mode", mode, ADVISE_MODES))
        precision = args.precision if args.precision is not None else self.default_precision
        if precision and precision.lower() not in PRECISIONS:
            raise UsageError(_choice_message("--precision", precision, PRECISIONS))
        for flag, value in (("--batch", args.batch), ("--seq", args.seq),
                            ("--devices", args.devices), ("--node-size", args.node_size)):
            if value is not None and value < 1:
                raise UsageError(f"{flag} {value} is not valid: expected an integer >= 1.")
        options = {
            "mode": mode,
            "hardware": args.hardware or self.default_hardware or None,
            "num_devices": args.devices or self.default_devices or None,
            "precision": precision.lower() or None,
            "batch_size": args.batch,
            "seq_len": args.seq,
            "model_name": args.model,
            "inputs_name": args.inputs,
            "price": self._price_rule(),
            "fabric": _fabric(args.fabric),
            "node_size": args.node_size,
        }
        return {k: v for k, v in options.items() if v is not None}

    def _price_rule(self) -> dict[str, Any] | None:
        """The price settings as ``advise(price=...)`` takes them (None: all at defaults)."""
        rule = {"basis": self.price_basis, "years": self.price_years,
                "utilisation": self.price_utilisation, "usd_per_kwh": self.price_usd_per_kwh}
        names = {"basis": "price_basis", "years": "price_years",
                 "utilisation": "price_utilisation", "usd_per_kwh": "price_usd_per_kwh"}
        if all(rule[k] == self.trait_defaults(names[k]) for k in rule):
            return None
        return rule

    def _use_widgets(self) -> bool:
        """Widgets need a kernel with comms (not a terminal) and the optional UI packages."""
        if not self.widgets or getattr(self.shell, "kernel", None) is None:
            return False
        from .widgets.show import widgets_available

        return widgets_available()


def _parse(magic: Any, line: str) -> Any:
    """Split like a shell (quotes group ``"NVIDIA H100 SXM"`` and are removed) and parse."""
    try:
        argv = arg_split(line, posix=True)
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"%advise could not split {line!r}: {exc}.") from exc
    for token in argv:
        flag = token.split("=", 1)[0]
        if flag.startswith("--") and not any(opt.startswith(flag) for opt in _OPTIONS):
            hint = close_matches(flag, _OPTIONS, n=1)
            fix = f" Did you mean {hint[0]}?" if hint else ""
            raise UsageError(f"%advise has no option {flag}.{fix} Options: "
                             f"{', '.join(_OPTIONS)}.")
    return magic.parser.parse_args(argv)


def _choice_message(flag: str, value: str, choices: tuple[str, ...]) -> str:
    hint = close_matches(value, choices, n=1)
    fix = f" Did you mean {hint[0]!r}?" if hint else ""
    return f"{flag} {value!r} is not valid: expected one of {', '.join(choices)}.{fix}"


def _pick_recommendation(recommendations: list[Any], which: str) -> tuple[Any, int]:
    if not recommendations:
        raise UsageError("The last report has no recommendations to insert.")
    count = len(recommendations)
    if which.isdigit():
        number = int(which)
        if not 1 <= number <= count:
            raise UsageError(f"--insert {number}: the last report has recommendations 1 to "
                             f"{count}.")
        return recommendations[number - 1], number
    ids = [rec.id for rec in recommendations]
    if which in ids:
        return recommendations[ids.index(which)], ids.index(which) + 1
    hint = close_matches(which, ids, n=1)
    fix = f" Did you mean {hint[0]!r}?" if hint else ""
    raise UsageError(f"--insert {which!r}: no recommendation has that number or id "
                     f"(numbers 1 to {count}).{fix}")


@contextlib.contextmanager
def _short_errors() -> Iterator[None]:
    """Show aiadvisor's own errors as a one-line UsageError (no traceback)."""
    try:
        yield
    except AIAdvisorError as exc:
        raise UsageError(str(exc)) from exc


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext aiadvisor``: register ``%advise`` and the ``Advisor`` settings."""
    try:
        magics = Advisor(shell=ipython)
    except ConfigValueError as exc:  # a bad c.Advisor.* value in the IPython profile's config
        ipython.configurables[:] = [c for c in ipython.configurables
                                    if not isinstance(c, Advisor)]
        raise UsageError(f"aiadvisor was not loaded: {exc}") from exc
    ipython.register_magics(magics)
    if magics not in ipython.configurables:
        ipython.configurables.append(magics)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext aiadvisor``: remove ``%advise`` and the ``Advisor`` settings."""
    ipython.magics_manager.magics["line"].pop("advise", None)
    registry = ipython.magics_manager.registry
    registry.pop("Advisor", None)
    ipython.configurables[:] = [c for c in ipython.configurables if not isinstance(c, Advisor)]
