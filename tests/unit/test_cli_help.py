"""`replog --help` and every subcommand's: each command and option says in one line what it does and its
default (or that it is required), so the help reads as a reference without the docs."""

import argparse

from replog.cli import build_parser


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("replog",)):
    """(command path, parser) for the parser and every subcommand under it, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def _subcommand_actions(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action._choices_actions


def _arguments(parser: argparse.ArgumentParser):
    return [a for a in parser._actions
            if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)]


ALL_PARSERS = list(_parsers(build_parser()))


def test_every_subcommand_has_a_one_line_help():
    for path, parser in ALL_PARSERS:
        for choice in _subcommand_actions(parser):
            assert choice.help, f"{' '.join(path)} {choice.dest} has no help"
            assert "\n" not in choice.help


def test_every_option_says_what_it_does_and_its_default():
    for path, parser in ALL_PARSERS:
        for action in _arguments(parser):
            where = f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}"
            assert action.help, f"{where} has no help"
            assert "\n" not in action.help, where
            if action.option_strings:  # positionals are required by their nature
                assert "default" in action.help or "required" in action.help, f"{where}: no default stated"


def test_every_help_renders():
    for path, parser in ALL_PARSERS:
        text = parser.format_help()  # expands %(default)s; a stray % would raise here
        assert text.startswith(f"usage: {' '.join(path)}")
