"""Engines: what each server prints, as data (one TOML file per engine) compiled into rules."""

from bootwatch.engines.rules import EngineRules, RuleBook, load_rulebook

__all__ = ["EngineRules", "RuleBook", "load_rulebook"]
