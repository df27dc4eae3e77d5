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
                f"configuration specified max_batch_size {current}, but in auto-complete-config function for "
                f"model '{self._name()}' specified max_batch_size {max_batch_size}"
            )
        self._config["max_batch_size"] = int(max_batch_size)

    def set_dynamic_batching(self) -> None:
        for other in ("sequence_batching", "ensemble_scheduling"):
            if other in self._config:
                raise ValueError(
                    f"Configuration specified scheduling_choice as '{other}', but auto-complete-config function "
                    f"for model '{self._name()}' tries to set scheduling_choice as 'dynamic_batching'"
                )
        self._config.setdefault("dynamic_batching", {})

    def set_model_transaction_policy(self, policy: dict[str, Any]) -> None:
        if any(key != "decoupled" for key in policy):
            raise ValueError(
                f"model transaction property in auto-complete-config function for model '{self._name()}' "
                "contains property other than 'decoupled'"
            )
        current = self._config.setdefault("model_transaction_policy", {})
        if "decoupled" in policy:
            if "decoupled" in current and bool(current["decoupled"]) != bool(policy["decoupled"]):
                raise ValueError(
                    f"trying to change decoupled property in auto-complete-config for model '{self._name()}', "
                    f"which is already set to '{bool(current['decoupled'])}'"
                )
            current["decoupled"] = bool(policy["decoupled"])

    def add_input(self, spec: dict[str, Any]) -> None:
        self._add("input", spec, ("name", "data_type", "dims", "optional"))

    def add_output(self, spec: dict[str, Any]) -> None:
        self._add("output", spec, ("name", "data_type", "dims"))

    def _add(self, kind: str, spec: dict[str, Any], keys: tuple[str, ...]) -> None:
        # Triton's checks, in its order and words: scripts match on them.
        where = f"in auto-complete-config function for model '{self._name()}'"
        if any(key not in keys for key in spec):
            listed = ", ".join(f"'{key}'" for key in keys[:-1]) + f" and '{keys[-1]}'"
            raise ValueError(f"{kind} '{spec.get('name')}' {where} contains property other than {listed}.")
        if "name" not in spec:
            raise ValueError(f"{kind} {where} is missing 'name' property.")
        for key in ("data_type", "dims"):
            if key not in spec:
                raise ValueError(f"{kind} '{spec['name']}' {where} is missing '{key}' property.")
        for entry in self._config.setdefault(kind, []):
            if entry.get("name") != spec["name"]:
                continue
            # The config file wins; auto-complete only fills in what it left out (the JSON
            # form writes a type left out as TYPE_INVALID).
            declared = entry.get("data_type", "TYPE_INVALID")
            if declared not in ("TYPE_INVALID", spec["data_type"]):
                raise ValueError(
                    f"unable to load model '{self._name()}', configuration expects datatype {declared} for "
                    f"{kind} '{spec['name']}', model provides {spec['data_type']}"
                )
            declared_dims = [int(d) for d in entry.get("dims") or []]
            if declared_dims and declared_dims != [int(d) for d in spec["dims"]]:
                raise ValueError(
                    f"model '{self._name()}', tensor '{spec['name']}': the model expects dims "
                    f"{[int(d) for d in spec['dims']]} but the model configuration specifies dims {declared_dims}"
                )
            entry["data_type"] = spec["data_type"]
            if not declared_dims:
                entry["dims"] = list(spec["dims"])
            return
        self._config[kind].append(dict(spec))
