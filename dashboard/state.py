"""Session state: every key, its default, and the `Config` the sidebar describes.

Every key the dashboard keeps in ``st.session_state`` has its first value
here, and nowhere else: widget keys in `DEFAULTS` (sidebar) and
`PAGE_DEFAULTS` (page controls), which the widgets take as their default
(`default`, `index_of`); the few keys no widget owns in `SESSION_DEFAULTS`,
set by `init_state`.

Widgets whose value belongs in a shared link are created with
``bind="query-params"``; their key is the query parameter's name, and every
page has its own path, so a URL such as
``/timeline?model=vgg16&gpus=64&net=ib-edr-100`` reproduces a view
(`dashboard.links` checks such a query and writes one).
A parameter equal to its default is left out of the URL; that is why the
widgets themselves must carry these defaults.

`config_from_state` turns the values into a frozen, hashable `Config`, the one
argument the cached simulator calls take.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

import sim
import sim.catalog
import sim.model
from sim.checks import check_choice, check_float, check_int
from sim.cluster import MAX_S_PER_BYTE
from sim.schedulers.names import MGWFBP, OPTIMAL, SYNCEASGD, WFBP

__all__ = [
    "BOUNDS",
    "COMPRESSIONS",
    "LEARN_MECHANISM_NETS",
    "PARITY_BY",
    "SUMMARY_BY",
    "DEFAULTS",
    "PAGE_BOUNDS",
    "PAGE_DEFAULTS",
    "SESSION_DEFAULTS",
    "STRAGGLER_DISTS",
    "TOY_ALPHAS_US",
    "UPLOAD",
    "UPLOAD_LABEL",
    "Config",
    "collective_options",
    "config_from_state",
    "default",
    "gpu_options",
    "index_of",
    "method_options",
    "init_state",
    "model_options",
    "number",
    "network_options",
    "scheduler_options",
    "stragglers_from_state",
    "text",
    "tune_knob_options",
]

#: The model option that means "use the uploaded layer CSV".
UPLOAD = "upload"
#: How the sidebar shows `UPLOAD` (and so how a link carries it); ``?model=upload`` works too.
UPLOAD_LABEL = "Upload a layer CSV…"

#: Sidebar keys (also query parameters) and their first-load values.
DEFAULTS: dict[str, object] = {
    "model": "resnet50",
    "batch": 32,
    "precision": "fp32",
    "gpu": "v100-sxm2",
    "gpus": 16,
    "per_node": 4,
    "net": "10gbe",
    "intra": "pcie3",
    "topo": "flat",  # node topology (data/topologies.csv)
    "coll": "ring",
    "fw": "auto",  # framework: per-message launch and fusion-buffer copies (data/frameworks.csv)
    "ab": False,  # override alpha and beta
    "alpha_us": 500.0,
    "beta_ns": 1.0,
    "calib": False,  # calibrate to a measured one-GPU iteration
    "calib_s": 0.25,
    "strag": False,  # stragglers: run the per-worker engine beside the identical-worker one
    "strag_dist_sb": "normal",
    "strag_cv_sb": 0.1,
    "strag_slow_sb": 0,
    "strag_factor_sb": 1.5,
    "strag_seed_sb": 0,
}

#: Page controls (also query parameters) and their first-load values.
PAGE_DEFAULTS: dict[str, object] = {
    "scheduler": MGWFBP,  # Timeline, Model
    "method": "",  # Timeline: a survey method preset instead of the scheduler ("" for none)
    "baseline": WFBP,  # Timeline
    "iters": 1,  # Timeline
    "show_messages": False,  # Timeline: the table of messages
    "compare": [WFBP, MGWFBP, SYNCEASGD, OPTIMAL],  # Compare
    "compare_methods": [],  # Compare: the survey's method presets
    "scale_schedulers": [WFBP, MGWFBP, OPTIMAL],  # Scaling
    "scale_nets": [],  # Scaling: networks besides the sidebar's
    "scale_timeline_scheduler": MGWFBP,  # Scaling: whose timeline is shown
    # Scaling's "pick_gpus" slider has no default of its own: the page keeps it equal to "gpus".
    "toy_alpha_us": 2000,  # Learn: one of TOY_ALPHAS_US
    "snap_scheduler": MGWFBP,  # Compare: the scheduler every snapshot runs
    "compare_compression": "none",  # Compare: one of COMPRESSIONS
    "tune_knob": "bucket-mb",  # Compare: one of tune_knob_options()
    "parity_by": "source",  # Validation: the parity plot's colours
    "summary_by": "source",  # Validation: the error table's rows
    "learn_mech_net": "10gbe",  # Learn: the mechanisms table's network, one of LEARN_MECHANISM_NETS
    # Algorithms: the algorithms, their knobs, the straggler section and the coarse-grained comparison
    "alg_picked": ["BSP", "ASP", "SSP", "EASGD", "AR-SGD", "GoSGD", "AD-PSGD"],  # sim.algorithms.ALGORITHMS
    "alg_steps": 100, "alg_ssp": 3, "alg_tau": 4, "alg_gossip": 0.5, "alg_seed": 0,
    "strag_dist": "normal", "strag_cv": 0.1, "strag_k": 0, "strag_factor": 1.5, "strag_jitter": 0.0,
    "strag_scheduler": WFBP, "alg_overlap": 0.5,
}

#: Bounds of the numeric page controls (as their widgets set them; "strag_k" is also at most the GPUs).
PAGE_BOUNDS: dict[str, tuple[float, float]] = {
    "iters": (1, 5), "toy_alpha_us": (10, 10000), "alg_steps": (10, 400), "alg_ssp": (0, 64), "alg_tau": (1, 64),
    "alg_gossip": (0.0, 1.0), "alg_seed": (0, 2**31 - 1), "strag_cv": (0.0, 1.0), "strag_k": (0, 65536),
    "strag_factor": (1.0, 4.0), "strag_jitter": (0.0, 1.0), "alg_overlap": (0.0, 1.0),
}
#: The compute-noise distributions of `sim.workers.StragglerSpec`.
STRAGGLER_DISTS = ["constant", "normal", "lognormal", "exponential"]

#: Compare's compression choices; any other is one flag away: python -m sim run --compression KIND
COMPRESSIONS = ["none", "fp16", "bf16", "topk:0.01", "topk:0.001", "powersgd:1", "powersgd:4"]
#: Validation's ways of colouring the parity plot and of grouping the error table.
PARITY_BY = ["source", "method"]
SUMMARY_BY = ["source", "method", "network", "split"]
#: The networks of the Learn page's mechanisms table.
LEARN_MECHANISM_NETS = ["10gbe", "ib-edr-100", "10gbe-k80-osu"]


def tune_knob_options() -> list[str]:
    """The knobs the Compare page tunes (`sim.tune.KNOBS` with a grid of values)."""
    from sim.schedulers.knobs import KNOBS
    from sim.tune import KNOBS as TUNABLE

    return [label for label, (name, _) in TUNABLE.items() if KNOBS[name].grid]

#: The Learn page's α slider's stops (µs).
TOY_ALPHAS_US = [10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]

#: Session keys that no widget owns: the uploaded CSV, kept across pages; whether the
#: link the session opened with was checked, and what was wrong with it (`dashboard.links`).
SESSION_DEFAULTS: dict[str, object] = {
    "csv_text": None,
    "csv_name": None,
    "csv_upload_id": None,  # the uploader's file behind csv_text (None: no upload, e.g. a validation case)
    "upload_gen": 0,  # the uploader's key suffix: a refused file is dropped from the uploader by a new key
    "upload_error": None,  # why the last uploaded file was refused (shown until the next file)
    "link_checked": False,
    "link_notes": [],
    "timeline_request": None,  # (settings, note): a button asked for the Timeline page
    "intro_seen": False,  # the "start here" panel was dismissed
    "snapshots": {},  # name -> pinned sidebar settings (`dashboard.snapshots`); also the link's "snap" values
    "snapshot_uploads": {},  # name -> the uploaded table a snapshot was pinned with (this session only)
}


def init_state(session: MutableMapping) -> None:
    """Give the keys no widget owns their first value, unless they have one."""
    for key, value in SESSION_DEFAULTS.items():
        if key not in session:
            session[key] = copy.copy(value)


def default(key: str):
    """The first-load value of a widget key (a copy: lists stay unshared)."""
    table = DEFAULTS if key in DEFAULTS else PAGE_DEFAULTS
    return copy.copy(table[key])


def index_of(key: str, options: list) -> int:
    """Position of ``key``'s default among ``options`` (0 if it is not there)."""
    value = default(key)
    return options.index(value) if value in options else 0


# --- options ---------------------------------------------------------------


def model_options() -> list[str]:
    """Zoo model names, then `UPLOAD`."""
    try:
        from sim.model import zoo_names

        names = list(zoo_names())
    except (ImportError, AttributeError):
        names = [str(DEFAULTS["model"])]
    return [*names, UPLOAD]


def gpu_options() -> list[str]:
    """GPU names from the catalog (a fixed list if the catalog has none)."""
    catalog_gpus = getattr(sim.catalog, "gpus", None)
    if catalog_gpus is None:
        return ["v100-sxm2"]
    try:
        return list(catalog_gpus()) or ["v100-sxm2"]
    except sim.SimInputError:
        return ["v100-sxm2"]


def network_options(scope: str) -> list[str]:
    """Network presets usable ``scope`` ("intra" or "inter")."""
    return [name for name, net in sim.catalog.networks().items() if net.scope in (scope, "any")]


def topology_options() -> list[str]:
    """Node topology presets (`sim.topology`)."""
    from sim.topology import topologies

    return [t.name for t in topologies()]


def collective_options() -> list[str]:
    return list(sim.COLLECTIVES)


def framework_options() -> list[str]:
    """Framework presets (`sim.frameworks`), ``auto`` first: the scheduler's own framework."""
    from sim.frameworks import framework_names

    return list(framework_names())


def scheduler_options() -> list[str]:
    return list(sim.SCHEDULERS)


def method_options() -> list[str]:
    """The survey's method presets (`sim.methods.METHODS`)."""
    from sim.methods import METHODS

    return list(METHODS)


# --- the configuration -----------------------------------------------------


@dataclass(frozen=True)
class Config:
    """What the sidebar describes: a workload and a cluster.

    ``csv_text`` holds an uploaded layer table when ``model`` is `UPLOAD`.
    ``alpha_s`` and ``beta_s_per_byte`` are set only when overridden;
    ``calibrate_iteration_s`` only when calibrating.
    """

    model: str = "resnet50"
    csv_text: str | None = None
    csv_name: str | None = None
    batch_size: int = 32
    precision: str = "fp32"
    gpu: str = "v100-sxm2"
    gpus: int = 16
    gpus_per_node: int = 4
    network: str = "10gbe"
    intra: str = "pcie3"
    topology: str = "flat"
    collective: str = "ring"
    framework: str = "auto"
    alpha_s: float | None = None
    beta_s_per_byte: float | None = None
    calibrate_iteration_s: float | None = None

    @property
    def model_label(self) -> str:
        if self.model == UPLOAD:
            return self.csv_name or "uploaded CSV"
        return self.model

    def replace(self, **changes) -> Config:
        return dataclasses.replace(self, **changes)

    def cluster(self, gpus: int | None = None, network: str | None = None) -> sim.Cluster:
        """The `sim.Cluster`; raises `sim.SimInputError` for absurd settings."""
        return sim.Cluster(
            gpus=self.gpus if gpus is None else gpus,
            gpus_per_node=self.gpus_per_node,
            network=self.network if network is None else network,
            intra=self.intra,
            topology=self.topology,
            collective=self.collective,
            framework=self.framework,
            alpha_s=self.alpha_s,
            beta_s_per_byte=self.beta_s_per_byte,
            gpu=self.gpu,
        )

    @property
    def compute_source(self) -> str:
        """Where the compute times come from, in a few words."""
        if self.calibrate_iteration_s is not None:
            return f"compute calibrated to a measured {self.calibrate_iteration_s:g} s one-GPU iteration"
        if self.model == UPLOAD:
            return "compute times from the uploaded CSV"
        return f"compute estimated (roofline) for {self.gpu}"


#: Bounds of the numeric keys (as the sidebar's widgets set them); a URL or session outside them is refused.
BOUNDS: dict[str, tuple[float, float]] = {
    "batch": (1, 65536), "gpus": (1, 65536), "per_node": (1, 64), "alpha_us": (0.0, 1e7),
    "beta_ns": (0.0, MAX_S_PER_BYTE * 1e9),  # the simulator's own bound (a link of MIN_LINK_GBPS)
    "calib_s": (1e-6, 1e4), "strag_cv_sb": (0.0, 1.0), "strag_slow_sb": (0, 65536), "strag_factor_sb": (1.0, 10.0),
    "strag_seed_sb": (0, 2**31 - 1),
}


def number(session: Mapping, key: str, kind=int):
    """``session[key]`` (or its default) as a checked number within `BOUNDS`; a `sim.SimInputError` naming the key."""
    value = session.get(key, DEFAULTS[key])
    if isinstance(value, str):
        try:
            value = kind(value.strip())
        except ValueError:
            raise sim.SimInputError(f"{key} = {value[:40]!r} is not {'a whole number' if kind is int else 'a number'}") from None
    low, high = BOUNDS[key]
    check = check_int if kind is int else check_float
    return check(key, value, low, high)


def text(session: Mapping, key: str, default: str | None = None) -> str:
    """``session[key]`` as a short string, or a `sim.SimInputError` naming the key."""
    value = session.get(key, DEFAULTS[key] if default is None else default)
    if not isinstance(value, str) or len(value) > 200:
        raise sim.SimInputError(f"{key} must be a name of at most 200 characters, got {str(value)[:40]!r}")
    return value


def config_from_state(session: Mapping) -> Config:
    """The `Config` described by the session's sidebar keys (from the widgets or the URL);
    a bad value is a `sim.SimInputError` naming its key."""
    override = bool(session.get("ab", False))
    calibrate = bool(session.get("calib", False))
    uploaded = session.get("model") == UPLOAD
    return Config(
        model=text(session, "model"),
        csv_text=session.get("csv_text") if uploaded else None,
        csv_name=session.get("csv_name") if uploaded else None,
        batch_size=number(session, "batch"),
        precision=check_choice("precision", text(session, "precision"), list(sim.model.BYTES_PER_PARAM)),
        gpu=text(session, "gpu"),
        gpus=number(session, "gpus"),
        gpus_per_node=number(session, "per_node"),
        network=text(session, "net"),
        intra=text(session, "intra"),
        topology=text(session, "topo"),
        collective=text(session, "coll"),
        framework=text(session, "fw"),
        alpha_s=number(session, "alpha_us", float) * 1e-6 if override else None,
        beta_s_per_byte=number(session, "beta_ns", float) * 1e-9 if override else None,
        calibrate_iteration_s=number(session, "calib_s", float) if calibrate else None,
    )


def stragglers_from_state(session: Mapping):
    """The sidebar's straggler setting as ``(sim.workers.StragglerSpec, seed)``, or None when off.

    Raises `sim.SimInputError` for an impossible setting (e.g. more slow workers than GPUs)."""
    if not session.get("strag", False):
        return None
    from sim.workers import StragglerSpec

    dist = text(session, "strag_dist_sb")
    gpus = number(session, "gpus")
    slow = number(session, "strag_slow_sb")
    if slow > gpus:
        raise sim.SimInputError(f"slow workers = {slow} is more than the {gpus} GPUs")
    spec = StragglerSpec(dist=dist, cv=0.0 if dist == "constant" else number(session, "strag_cv_sb", float),
                         stragglers=slow, factor=number(session, "strag_factor_sb", float))
    return spec, number(session, "strag_seed_sb")
