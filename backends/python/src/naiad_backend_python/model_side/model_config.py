"""The model's config as the model API sees it: `ModelConfig` for `auto_complete_config`, and
the lookups pb_utils offers on the config dict."""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "ModelConfig",
    "get_input_config_by_name",
    "get_output_config_by_name",
    "using_decoupled_model_transaction_policy",
]


def get_input_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    for spec in model_config.get("input", []):
        if spec.get("name") == name:
            return spec
    return None


def get_output_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    for spec in model_config.get("output", []):
        if spec.get("name") == name:
            return spec
    return None


def using_decoupled_model_transaction_policy(model_config: dict[str, Any]) -> bool:
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))


class ModelConfig:
    """The config handed to `TritonPythonModel.auto_complete_config` (Triton's JSON form as
    a dict); edits apply to the config the server then validates. Conflicts with what the
    config file says raise ValueError, as in Triton."""

    _TENSOR_KEYS = ("name", "data_type", "dims", "optional")

    def __init__(self, config: dict[str, Any] | str | bytes) -> None:
        self._config: dict[str, Any] = json.loads(config) if isinstance(config, (str, bytes)) else config

    def as_dict(self) -> dict[str, Any]:
        return self._config

    def _name(self) -> str:
        return str(self._config.get("name", ""))

    def set_max_batch_size(self, max_batch_size: int) -> None:
        current = int(self._config.get("max_batch_size", 0) or 0)
        if current > max_batch_size:
            raise ValueError(
                f"configuration specified max_batch_size {current}, but auto_complete_config of model "
                f"'{self._name()}' specified max_batch_size {max_batch_size}"
            )
        self._config["max_batch_size"] = int(max_batch_size)

    def set_dynamic_batching(self) -> None:
        for other in ("sequence_batching", "ensemble_scheduling"):
            if other in self._config:
                raise ValueError(
                    f"model '{self._name()}' configures {other}; auto_complete_config cannot set dynamic_batching"
                )
        self._config.setdefault("dynamic_batching", {})

    def set_model_transaction_policy(self, policy: dict[str, Any]) -> None:
        unknown = [key for key in policy if key != "decoupled"]
        if unknown:
            raise ValueError(f"model_transaction_policy of model '{self._name()}' has unknown properties {unknown}")
        current = self._config.setdefault("model_transaction_policy", {})
        if "decoupled" in policy:
            if "decoupled" in current and bool(current["decoupled"]) != bool(policy["decoupled"]):
                raise ValueError(f"model '{self._name()}': decoupled is already {current['decoupled']}")
            current["decoupled"] = bool(policy["decoupled"])

    def add_input(self, spec: dict[str, Any]) -> None:
        self._add("input", spec)

    def add_output(self, spec: dict[str, Any]) -> None:
        self._add("output", spec)

    def _add(self, kind: str, spec: dict[str, Any]) -> None:
        unknown = [key for key in spec if key not in self._TENSOR_KEYS]
        if unknown:
            raise ValueError(
                f"{kind} {spec.get('name')!r} of model '{self._name()}' has properties "
                f"other than {', '.join(self._TENSOR_KEYS)}: {unknown}"
            )
        for key in ("name", "data_type", "dims"):
            if key not in spec:
                raise ValueError(f"{kind} {spec.get('name')!r} of model '{self._name()}' has no '{key}'")
        entries = self._config.setdefault(kind, [])
        for entry in entries:
            if entry.get("name") != spec["name"]:
                continue
            # The config file wins; auto-complete only fills in what it left out.
            if entry.get("data_type", "TYPE_INVALID") not in ("TYPE_INVALID", spec["data_type"]):
                raise ValueError(
                    f"{kind} '{spec['name']}' of model '{self._name()}' has data_type "
                    f"{entry['data_type']} in the config, auto_complete_config says {spec['data_type']}"
                )
            if entry.get("dims") and [int(d) for d in entry["dims"]] != [int(d) for d in spec["dims"]]:
                raise ValueError(
                    f"{kind} '{spec['name']}' of model '{self._name()}' has dims {entry['dims']} "
                    f"in the config, auto_complete_config says {spec['dims']}"
                )
            entry.setdefault("data_type", spec["data_type"])
            if not entry.get("dims"):
                entry["dims"] = list(spec["dims"])
            return
        entries.append(dict(spec))
