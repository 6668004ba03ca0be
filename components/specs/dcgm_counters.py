"""What the DCGM exporter collects, in one place for both ways of running it (the standalone
``dcgm-exporter`` chart and the GPU Operator's exporter), and the XID facts the alerts read.

Why a counters file of our own: ``DCGM_FI_DEV_XID_ERRORS`` is a gauge holding the *last* XID a GPU
reported, and it keeps that value until a driver reload or an exporter restart (NVIDIA/DCGM#277,
NVIDIA/dcgm-exporter#500). Alerting on it turns one application XID (43: a CUDA process killed at
scale-down) into a page that never resolves. The exporter's own ``DCGM_EXP_XID_ERRORS_COUNT`` counts
XIDs within a sliding window and carries the XID number as the ``xid`` label, but it is commented out
in the charts' default counters, so the counters file below turns it on (dcgm-exporter
``pkg/cmd/app.go``: flag ``xid-count-window-size``, env ``DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE``,
default 5 minutes; ``appendDCGMXIDErrorsCountDependency`` adds the XID field it counts from).
"""

from __future__ import annotations

#: XIDs that mean the GPU or its link is faulty (not the program running on it): double-bit ECC (48),
#: row-remapping events and failures (63, 64), NVLink error (74), fallen off the bus (79), high
#: single-bit ECC rate (92), contained/uncontained ECC (94, 95), GSP timeouts and errors (119, 120).
#: These page; every other XID (13, 31, 43, ... faults of the application) is a warning.
HARDWARE_XIDS: tuple[int, ...] = (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)
#: The exporter's windowed XID count, labelled ``xid``.
XID_COUNT_METRIC = "DCGM_EXP_XID_ERRORS_COUNT"
#: Window of that count, set explicitly (it is also the exporter's default) so the alerts' tests and
#: the exporter agree: an XID counts for this long after it happened, then the alert resolves.
XID_COUNT_WINDOW_MS = 300_000
XID_COUNT_WINDOW_ENV = "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE"
#: ConfigMap the GPU Operator's chart creates from the counters (key ``dcgm-metrics.csv``).
GPU_OPERATOR_COUNTERS_CONFIGMAP = "dcgm-exporter-counters"

#: (DCGM field, Prometheus type, help). The exporter reads the file whole: it replaces the default
#: list, so everything the dashboards and alerts read is listed, plus health fields worth keeping.
COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered (kept until a driver reload)."),
    (XID_COUNT_METRIC, "gauge", "Count of XID errors within the xid-count-window-size window, by xid."),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors."),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors."),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
)


def counters_csv() -> str:
    """The exporter's counters file (``field, type, help`` per line, ``#`` comments)."""
    lines = ["# DCGM field, Prometheus metric type, help message (llm-platform: components/specs/dcgm_counters.py)"]
    lines += [f"{field}, {kind}, {help_text}" for field, kind, help_text in COUNTERS]
    return "\n".join(lines) + "\n"


def xid_window_env() -> list[dict[str, str]]:
    """The container environment that pins the XID count window."""
    return [{"name": XID_COUNT_WINDOW_ENV, "value": str(XID_COUNT_WINDOW_MS)}]


def hardware_xid_regex() -> str:
    """PromQL regex matching exactly the hardware XIDs (label matchers are anchored)."""
    return "|".join(str(x) for x in HARDWARE_XIDS)
