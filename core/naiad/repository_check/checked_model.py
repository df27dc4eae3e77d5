"""`CheckedModel`: one model of the repository while `naiad check` looks at it: where it
lives, its config as read and as completed, and the findings so far."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config.model_config import ModelConfig
from ..protos import model_config_pb2 as pb
from ..repository.local import ModelSource
from .config_source import ConfigSource, Position
from .finding import Finding, Severity

__all__ = ["CheckedModel"]


@dataclass(slots=True)
class CheckedModel:
    """`repository` is the repository as the command line named it. `proto` is the parsed
    config once it parsed (its backend resolved); `completed` the config a load would
    serve with, once every check up to the model file passed (an ensemble's steps are
    checked against it); `versions` the versions a load would build."""

    source: ModelSource
    repository: str
    config: ConfigSource
    findings: list[Finding] = field(default_factory=list)
    proto: pb.ModelConfig | None = None
    completed: ModelConfig | None = None
    versions: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def failed(self) -> bool:
        """Whether a load of this model would fail."""
        return any(f.severity == "error" for f in self.findings)

    def report(
        self,
        severity: Severity,
        message: str,
        fix: str,
        *,
        field: str = "",
        file: str | None = None,
        at: Position | None = None,
    ) -> None:
        """Record a finding about config.pbtxt (placed by `at`, else by what `message`
        names, else by `field`), or about `file` (relative to the repository; no place in
        it). The server's messages start with the model's name, which the report shows
        once per model: it is cut here."""
        text = self.source.without_paths(message)
        prefix = f"model '{self.name}': "
        if text.startswith(prefix):
            text = text[len(prefix) :]
        if file is not None:
            line, column = at or (None, None)
        else:
            file = self.config.file
            line, column = at or self.config.locate(text, field)
        self.findings.append(Finding(severity, self.name, self.repository, file, line, column, text, fix))
