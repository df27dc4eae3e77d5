"""`naiad check`: an offline linter of a model repository. Each model is checked as a
load would check it, through the server's own checks and each installed backend's
auto-complete, without serving (no ports, no model instances); every problem becomes a
`Finding` with its file, line and fix (docs/check.md)."""

from .checker import CheckReport, check_repositories
from .finding import Finding, Severity
from .report import SCHEMA_VERSION, render_json, render_text

__all__ = ["CheckReport", "Finding", "SCHEMA_VERSION", "Severity", "check_repositories", "render_json", "render_text"]
