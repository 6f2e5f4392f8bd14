"""A fabric attachment's cni_config is JSON read as carefully as a config: bounded in size and depth, finite numbers
(NaN, inf and 1e999 refused), one message naming its config path and line; and the live NAD's config is held to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import stacks
from config.values import bounded_json
from tests import fixtures
from tests.helpers import run_cli, yaml_text
from tools.render import run as render_run

DEEP_JSON = "[" * 100_000 + "]" * 100_000


SEVENTY_DEEP_JSON = '{"a":' * 70 + "1" + "}" * 70  # under Python's recursion limit, over the readers' depth


class TestCniNumbers:
    @pytest.mark.parametrize("number", ["1e999", "-1e999", "1.5e400", "123456789e999"])
    @pytest.mark.parametrize("command", ["config", "check"])
    def test_an_overflowing_number_is_refused_at_its_path_and_line(
        self, number: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        data = fixtures.roce()
        data["fabric"]["attachments"][0]["cni_config"] = '{"type": "sriov", "mtu": ' + number + "}"
        path = tmp_path / "roce.yaml"
        path.write_text(yaml_text(data, sort_keys=False, width=1 << 30), encoding="utf-8")
        code, out, err = run_cli([command, "--config", str(path)], capsys)
        assert code == 2 and out == "", err
        assert err.startswith(f"error: {path}: invalid configuration") and "fabric.attachments[0].cni_config" in err, err
        assert f"{number} is not a finite number" in err, err

    @pytest.mark.parametrize("text,value", [('{"mtu": 9000}', 9000), ('{"mtu": 1.5e3}', 1500.0), ('{"x": 1e308}', 1e308)])
    def test_a_finite_number_still_reads(self, text: str, value: float) -> None:
        assert list(bounded_json(text, 5).values()) == [value]

    @pytest.mark.parametrize("text", ['{"a": 1e999}', "[1, 2, -1e999]", '{"a": Infinity}', '{"a": NaN}'])
    def test_the_json_reader_of_committed_files_refuses_them(self, text: str) -> None:
        with pytest.raises(stacks.ConfigError, match=r"^outputs\.json: not valid JSON: .*(not a finite number|not a JSON number)"):
            stacks.parse_json(text, "outputs.json")


CNI: dict[str, tuple[str, str]] = {
    "nested 100,000 deep": (DEEP_JSON, "nested more than 20 levels deep"),
    "nested 70 deep": (SEVENTY_DEEP_JSON, "nested more than 20 levels deep"),
    "NaN": ('{"type": "sriov", "mtu": NaN}', "NaN is not a JSON number"),
    "larger than a ConfigMap holds": ('{"name": "' + "x" * 300_000 + '"}', "longer than"),
}


class TestCniConfigJson:
    @pytest.mark.parametrize("case", CNI)
    @pytest.mark.parametrize("command", ["config", "check"])
    def test_a_cni_config_that_is_not_one_is_refused_with_its_path_and_line(
        self, case: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        data = fixtures.roce()
        data["fabric"]["attachments"][0]["cni_config"] = CNI[case][0]
        path = tmp_path / "roce.yaml"
        path.write_text(yaml_text(data, sort_keys=False, width=1 << 30), encoding="utf-8")
        code, out, err = run_cli([command, "--config", str(path)], capsys)
        assert code == 2 and out == "", err
        assert err.startswith(f"error: {path}: invalid configuration") and "fabric.attachments[0].cni_config" in err, err
        assert CNI[case][1] in err and f"{path}:" in err.split("cni_config", 1)[1], err

    @pytest.mark.parametrize(
        "live_config", [DEEP_JSON, SEVENTY_DEEP_JSON, '{"type": "sriov", "mtu": NaN}'], ids=["100,000 deep", "70 deep", "NaN"]
    )
    def test_a_live_nad_config_that_is_not_one_differs_in_preview(self, live_config: str) -> None:
        # nad_mode copy: preview compares the source NAD's config on the cluster with the stack's cni_config.
        import pulumi

        live = {"metadata": {"annotations": {"k8s.v1.cni.cncf.io/resourceName": "openshift.io/port1rdma"}}, "spec": {"config": live_config}}
        with pytest.raises(pulumi.RunError, match=r"NetworkAttachmentDefinition default/port1-network: its CNI config differs"):
            render_run(fixtures.config("roce"), live={("NetworkAttachmentDefinition", "default/port1-network"): live})

    def test_a_sound_cni_config_still_validates(self) -> None:
        config = fixtures.config("roce")
        assert config.fabric is not None and json.loads(config.fabric.attachments[0].cni_config or "")["type"] == "sriov"
