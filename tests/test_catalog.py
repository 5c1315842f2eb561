"""Network and GPU catalogs: required presets, sources, conversions, user presets."""

import csv
import math
from pathlib import Path

import pytest

from sim.catalog import (
    GPU,
    USER_NETWORKS_ENV,
    Network,
    get_gpu,
    get_network,
    gpus,
    networks,
    user_networks,
    user_networks_path,
)
from sim.errors import SimInputError

REFERENCE = Path(__file__).resolve().parent.parent / "data" / "reference"


def mgwfbp_fit(network: str, gpus: int) -> dict:
    """One row of the MG-WFBP authors' fitted all-reduce lines (data/reference/mgwfbp_fitted_alpha_beta.csv)."""
    with open(REFERENCE / "mgwfbp_fitted_alpha_beta.csv", newline="") as fh:
        row = next(r for r in csv.DictReader(fh) if r["network"] == network and int(r["gpus"]) == gpus)
    return {"alpha_s": float(row["alpha_s"]), "beta_s_per_byte": float(row["beta_s_per_byte"])}

REQUIRED_NETWORKS = {
    "pcie3": "intra",
    "pcie4": "intra",
    "nvlink2": "intra",
    "nvlink3": "intra",
    "nvlink4": "intra",
    "10gbe": "inter",
    "25gbe": "inter",
    "100gbe": "inter",
    "ib-fdr-56": "inter",
    "ib-edr-100": "inter",
    "ib-hdr-200": "inter",
    "ib-ndr-400": "inter",
}

REQUIRED_GPUS = ("k80", "p100", "v100-pcie", "v100-sxm2", "t4", "a100", "a100-40gb", "h100", "rtx4090")

HEADER = "name,scope,line_rate_gbps,effective_gbps,alpha_us,source,note\n"


@pytest.fixture(autouse=True)
def no_user_presets(monkeypatch, tmp_path):
    """Keep a developer's own ~/.config/ssgd/networks.csv out of the tests."""
    monkeypatch.delenv(USER_NETWORKS_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def user_file(tmp_path, monkeypatch, body: str, header: str = HEADER):
    path = tmp_path / "my_networks.csv"
    path.write_text(header + body)
    monkeypatch.setenv(USER_NETWORKS_ENV, str(path))
    return path


class TestBuiltinNetworks:
    @pytest.mark.parametrize("name", sorted(REQUIRED_NETWORKS))
    def test_required_preset_exists_with_source(self, name):
        net = get_network(name)
        assert net.scope == REQUIRED_NETWORKS[name]
        assert net.source.strip()
        assert net.note.strip()  # every derived value says how it was derived

    @pytest.mark.parametrize("name", sorted(REQUIRED_NETWORKS))
    def test_effective_at_most_line_rate(self, name):
        net = get_network(name)
        assert 0 < net.effective_gbps <= net.line_rate_gbps

    def test_every_row_has_a_source(self):
        for net in networks().values():
            assert net.source.strip(), net.name

    def test_line_rates_from_the_specs(self):
        # PCIe x16 after 128b/130b coding; IB FDR 4x after 64b/66b; NVLink per
        # direction = links x 25 GB/s x 8 bit/B.
        assert get_network("pcie3").line_rate_gbps == pytest.approx(16 * 8 * 128 / 130, abs=0.01)
        assert get_network("pcie4").line_rate_gbps == pytest.approx(16 * 16 * 128 / 130, abs=0.01)
        assert get_network("ib-fdr-56").line_rate_gbps == pytest.approx(4 * 14.0625 * 64 / 66, abs=0.01)
        assert get_network("nvlink2").line_rate_gbps == 6 * 25 * 8
        assert get_network("nvlink3").line_rate_gbps == 12 * 25 * 8
        assert get_network("nvlink4").line_rate_gbps == 18 * 25 * 8

    @pytest.mark.parametrize("preset, network", [("10gbe", "10GbE"), ("ib-fdr-56", "56GbIB")])
    def test_inter_node_presets_from_the_mgwfbp_fit(self, preset, network):
        # data/reference/mgwfbp_fitted_alpha_beta.csv, 8 GPUs on 2 nodes: alpha_AR over the 2(P-1) = 14 steps of
        # a ring on P = 8; beta_AR is the NIC's per-byte time (M bytes per NIC direction for N = 2 nodes). The
        # presets keep 3-4 significant figures.
        fit = mgwfbp_fit(network, 8)
        net = get_network(preset)
        assert net.alpha_s == pytest.approx(fit["alpha_s"] / 14, rel=2e-3)
        assert net.beta_s_per_byte == pytest.approx(fit["beta_s_per_byte"], rel=2e-3)

    def test_the_figures_data_readme_quotes_from_the_reference_files(self):
        """data/README: pcie3's latency is the 4-GPU fit's alpha_AR / 6 and that fit's per-edge rate 58.28 Gb/s
        (beta_link = beta_AR x P / (2(P - 1)) on P = 4); the 16-GPU 10GbE fit's beta_AR 7.40e-10 s/B is below
        what 4 nodes at 10 Gb/s allow (2 x 3/4 x 8 / 10e9 = 1.2e-9); 10gbe's per-step latency agrees with the
        31.92 us of a 4-byte MPI all-reduce on 2 nodes (allreduce2.log)."""
        four = mgwfbp_fit("10GbE", 4)
        assert get_network("pcie3").alpha_s == pytest.approx(four["alpha_s"] / 6, rel=2e-3)
        assert 8 / (four["beta_s_per_byte"] * 4 / 6) / 1e9 == pytest.approx(58.28, abs=0.005)
        sixteen = mgwfbp_fit("10GbE", 16)
        assert round(sixteen["beta_s_per_byte"], 12) == 7.40e-10 < 2 * 3 / 4 * 8 / 10e9
        log = (REFERENCE / "bcaffe_k80_10gbe" / "allreduce2.log").read_text().splitlines()
        four_bytes = next(float(line.split()[1]) for line in log if line.startswith("2,4 "))
        assert four_bytes == 31.92

    def test_beta_is_eight_over_effective_rate(self):
        net = get_network("10gbe")
        assert net.beta_s_per_byte == pytest.approx(8 / (9.33e9))

    def test_unknown_name_lists_valid_ones(self):
        with pytest.raises(SimInputError, match="unknown network 'token-ring'") as info:
            get_network("token-ring")
        message = str(info.value)
        assert "\n" not in message
        for name in REQUIRED_NETWORKS:
            assert name in message


class TestNetworkValidation:
    def test_effective_above_line_rate_refused(self):
        with pytest.raises(SimInputError, match="effective_gbps 12 exceeds line_rate_gbps 10"):
            Network("x", "inter", 10, 12, 1e-5, "test")

    def test_negative_alpha_refused(self):
        with pytest.raises(SimInputError, match="alpha"):
            Network("x", "inter", 10, 9, -1e-6, "test")

    def test_bad_scope_refused(self):
        with pytest.raises(SimInputError, match="scope"):
            Network("x", "outer", 10, 9, 1e-6, "test")

    def test_from_row_reads_alpha_in_microseconds(self):
        net = Network.from_row(
            {"name": "x", "scope": "inter", "line_rate_gbps": 10, "effective_gbps": 8, "alpha_us": 25}
        )
        assert net.alpha_s == pytest.approx(25e-6)
        assert net.beta_s_per_byte == pytest.approx(1e-9)

    def test_from_row_without_line_rate_refused(self):
        with pytest.raises(SimInputError, match="line_rate_gbps must be a number"):
            Network.from_row(
                {"name": "x", "scope": "inter", "line_rate_gbps": None, "effective_gbps": 8, "alpha_us": 25}
            )


class TestUserPresets:
    def test_default_path_under_home_config(self, tmp_path):
        assert user_networks_path() == tmp_path / "home" / ".config" / "ssgd" / "networks.csv"

    def test_env_var_sets_path(self, tmp_path, monkeypatch):
        path = user_file(tmp_path, monkeypatch, "")
        assert user_networks_path() == path

    def test_user_preset_merged(self, tmp_path, monkeypatch):
        user_file(tmp_path, monkeypatch, "lab-ib,inter,100,80,12,iperf + nccl-tests on our cluster 2024-05,\n")
        table = networks()
        assert table["lab-ib"].effective_gbps == 80
        assert table["lab-ib"].alpha_s == pytest.approx(12e-6)
        assert "10gbe" in table
        assert get_network("lab-ib").source.startswith("iperf")

    def test_home_config_file_is_read(self, tmp_path):
        path = tmp_path / "home" / ".config" / "ssgd" / "networks.csv"
        path.parent.mkdir(parents=True)
        path.write_text(HEADER + "home-net,inter,10,5,50,own measurement,\n")
        assert "home-net" in networks()

    def test_shadowing_builtin_refused(self, tmp_path, monkeypatch):
        user_file(tmp_path, monkeypatch, "10gbe,inter,10,9.9,5,wishful,\n")
        with pytest.raises(SimInputError, match=r"line 2 \(10gbe\): .*10gbe reuses a built-in"):
            user_networks()
        assert get_network("10gbe").effective_gbps == 9.33  # the built-in, not the wishful row

    def test_shadowing_builtin_allowed_where_the_row_says_so(self, tmp_path, monkeypatch):
        user_file(tmp_path, monkeypatch, "10gbe,inter,10,9.9,5,own fit,,yes\n", header=HEADER.strip() + ",overrides_builtin\n")
        assert get_network("10gbe").effective_gbps == 9.9

    def test_missing_column_named(self, tmp_path, monkeypatch):
        user_file(
            tmp_path,
            monkeypatch,
            "lab,inter,100,12,meas,\n",
            header="name,scope,line_rate_gbps,alpha_us,source,note\n",
        )
        with pytest.raises(SimInputError, match="line 1: missing column.*effective_gbps"):
            user_networks()

    def test_negative_value_names_row_and_field(self, tmp_path, monkeypatch):
        user_file(tmp_path, monkeypatch, "ok,inter,100,80,12,meas,\nbad,inter,100,-80,12,meas,\n")
        with pytest.raises(SimInputError, match=r"line 3.*'bad'.*effective_gbps must be a finite number > 0"):
            user_networks()

    def test_non_number_names_row_and_field(self, tmp_path, monkeypatch):
        user_file(tmp_path, monkeypatch, "lab,inter,fast,80,12,meas,\n")
        with pytest.raises(SimInputError, match=r"line 2 \(lab\): line_rate_gbps must be a number, got 'fast'"):
            user_networks()

    def test_duplicate_name_names_row(self, tmp_path, monkeypatch):
        user_file(tmp_path, monkeypatch, "lab,inter,100,80,12,meas,\nlab,inter,100,70,12,meas,\n")
        with pytest.raises(SimInputError, match=r"line 3 \(lab\): duplicate network name 'lab'"):
            user_networks()

    def test_missing_source_refused(self, tmp_path, monkeypatch):
        user_file(tmp_path, monkeypatch, "lab,inter,100,80,12,,\n")
        with pytest.raises(SimInputError, match=r"line 2 \(lab\): source is empty"):
            user_networks()

    def test_env_var_to_missing_file_refused(self, tmp_path, monkeypatch):
        monkeypatch.setenv(USER_NETWORKS_ENV, str(tmp_path / "nope.csv"))
        with pytest.raises(SimInputError, match="SSGD_NETWORKS=.*nope.csv: no such file"):
            user_networks()
        assert "10gbe" in networks()

    def test_edit_is_seen(self, tmp_path, monkeypatch):
        path = user_file(tmp_path, monkeypatch, "lab,inter,100,80,12,meas,\n")
        assert networks()["lab"].effective_gbps == 80
        path.write_text(HEADER + "lab,inter,100,75.5,12,meas,\n")
        assert networks()["lab"].effective_gbps == 75.5

    def test_error_messages_are_one_line(self, tmp_path, monkeypatch):
        user_file(tmp_path, monkeypatch, "lab,inter,100,80,12,meas,\nlab,inter,100,70,12,meas,\n")
        with pytest.raises(SimInputError) as info:
            user_networks()
        assert "\n" not in str(info.value)


class TestGPUs:
    @pytest.mark.parametrize("name", REQUIRED_GPUS)
    def test_required_gpu_exists_with_source(self, name):
        gpu = get_gpu(name)
        assert gpu.source.strip()
        assert gpu.fp32_tflops <= gpu.tf32_tflops <= gpu.fp16_tensor_tflops

    def test_conversions_hand_worked_v100_sxm2(self):
        # Datasheet: 15.7 TFLOPS FP32, 125 TFLOPS tensor, 900 GB/s, 32 GB.
        gpu = get_gpu("v100-sxm2")
        assert gpu.peak_flops("fp32") == pytest.approx(15.7e12)
        assert gpu.peak_flops("tf32") == pytest.approx(15.7e12)  # no TF32 on Volta
        assert gpu.peak_flops("fp16") == pytest.approx(125e12)
        assert gpu.mem_bw_bytes_per_s == pytest.approx(900e9)
        assert gpu.mem_bytes == pytest.approx(32e9)

    def test_k80_is_one_die(self):
        # Board: 8.74 TFLOPS, 480 GB/s, 24 GB for two GK210 dies.
        gpu = get_gpu("k80")
        assert gpu.peak_flops("fp32") == pytest.approx(8.74e12 / 2)
        assert gpu.mem_bw_bytes_per_s == pytest.approx(480e9 / 2)
        assert "GK210" in gpu.note

    def test_h100_is_dense(self):
        # Datasheet FP16 tensor 1979 TFLOPS is with sparsity; dense is half.
        assert get_gpu("h100").peak_flops("fp16") == pytest.approx(1979e12 / 2)

    def test_unknown_precision_lists_valid(self):
        with pytest.raises(SimInputError, match="unknown precision 'fp8'; valid: fp32, tf32, fp16"):
            get_gpu("a100").peak_flops("fp8")

    def test_unknown_gpu_lists_valid(self):
        with pytest.raises(SimInputError, match="unknown gpu 'voodoo2'; valid: .*a100.*v100-sxm2"):
            get_gpu("voodoo2")

    def test_validated_on_construction(self):
        with pytest.raises(SimInputError, match="gpu 'x': mem_bw_gb_per_s must be a finite number > 0"):
            GPU("x", 1, 1, 1, 0, 1, "test")
        with pytest.raises(SimInputError, match="fp32_tflops"):
            GPU("x", math.nan, 1, 1, 1, 1, "test")

    def test_frozen(self):
        gpu = get_gpu("t4")
        with pytest.raises(AttributeError):
            gpu.fp32_tflops = 1.0  # type: ignore[misc]

    def test_gpus_returns_a_copy(self):
        table = gpus()
        table.clear()
        assert "a100" in gpus()
