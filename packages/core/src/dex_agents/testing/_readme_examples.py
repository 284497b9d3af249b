"""README examples run as written: their Python blocks, and a script run as a user would run it."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dex_agents.exceptions import DexAgentsError

# A fence's info string is `python` alone for a block that runs; `python notest` (or any other
# word after it) marks a fragment that is only shown.
_FENCED_BLOCK = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
_STDERR_TAIL_CHARS = 3000


class ExampleScriptError(DexAgentsError, AssertionError):
    """A README has no such section, or an example script failed or ran out of time.

    An ``AssertionError``, so a test that runs an example fails (rather than errors) with the
    script's own error output in the message.
    """


@dataclass(frozen=True)
class ExampleRun:
    """What one run of an example script printed.

    Example:
        >>> ExampleRun(stdout="turn-1 completed\\n", stderr="").stdout.splitlines()
        ['turn-1 completed']
    """

    stdout: str
    stderr: str


def readme_python_blocks(
    readme: Path, heading: str | None = None, *, include_untested: bool = False
) -> list[str]:
    """The bodies of the ```` ```python ```` blocks of a Markdown file, in order.

    With ``heading``, only the blocks of its ``## heading`` section (up to the next ``## ``
    heading). Blocks fenced ```` ```python notest ```` are fragments, left out unless
    ``include_untested``.

    Raises:
        ExampleScriptError: The file has no ``## heading`` line.

    Example:
        >>> import tempfile
        >>> readme = Path(tempfile.mkdtemp()) / "README.md"
        >>> _ = readme.write_text("## Example\\n```python\\nprint(1)\\n```\\n## Next\\n")
        >>> readme_python_blocks(readme, "Example")
        ['print(1)\\n']
    """
    text = readme.read_text()
    if heading is not None:
        text = _section(text, heading, readme)
    return [
        body
        for language, info, body in _FENCED_BLOCK.findall(text)
        if language == "python" and (include_untested or not info.strip())
    ]


def run_example_script(
    script: Path,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    isolated: bool = False,
    timeout: float = 240.0,
) -> ExampleRun:
    """Run a Python script with this interpreter as a user would, and return what it printed.

    It runs in ``cwd`` (the script's directory by default) with ``env`` (this process's by
    default); ``isolated`` runs ``python -I``, so neither ``PYTHONPATH`` nor the script's
    directory adds modules.

    Raises:
        ExampleScriptError: The script exited non-zero (the message ends with its error output)
            or ran longer than ``timeout`` seconds.

    Example:
        >>> import tempfile
        >>> script = Path(tempfile.mkdtemp()) / "hello.py"
        >>> _ = script.write_text("print('hello')")
        >>> run_example_script(script).stdout
        'hello\\n'
    """
    command = [sys.executable, *(["-I"] if isolated else []), str(script)]
    try:
        finished = subprocess.run(
            command,
            cwd=cwd if cwd is not None else script.parent,
            env=dict(env) if env is not None else None,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise ExampleScriptError(f"{script.name} ran longer than {timeout} s") from error
    if finished.returncode != 0:
        raise ExampleScriptError(
            f"{script.name} exited with {finished.returncode}:\n"
            f"{finished.stderr[-_STDERR_TAIL_CHARS:]}"
        )
    return ExampleRun(finished.stdout, finished.stderr)


def run_readme_example(
    source: str,
    directory: Path,
    *,
    runs: int = 2,
    file_name: str = "readme_example.py",
    env: Mapping[str, str] | None = None,
    isolated: bool = False,
    timeout: float = 240.0,
) -> list[ExampleRun]:
    """Write a README example to ``directory/file_name`` and run it ``runs`` times there.

    The runs share the directory, so a second run meets what the first left behind (the embedded
    engine's database): a README example that says it can run twice is checked doing so.

    Raises:
        ExampleScriptError: A run exited non-zero or ran longer than ``timeout`` seconds.

    Example:
        >>> import tempfile
        >>> runs = run_readme_example("print('hi')", Path(tempfile.mkdtemp()))
        >>> [run.stdout for run in runs]
        ['hi\\n', 'hi\\n']
    """
    script = directory / file_name
    script.write_text(source)
    return [
        run_example_script(script, cwd=directory, env=env, isolated=isolated, timeout=timeout)
        for _ in range(runs)
    ]


def readme_example_lines(
    readme: Path,
    directory: Path,
    heading: str | None = None,
    *,
    runs: int = 2,
    file_name: str = "readme_example.py",
    env: Mapping[str, str] | None = None,
) -> list[list[str]]:
    """Run a README's one tested example ``runs`` times in ``directory``, as a user who copied
    it would (:func:`run_readme_example`), and return the lines each run printed.

    The example is the one ```` ```python ```` block of the file (of its ``## heading`` section
    with ``heading``) that is not fenced ``notest``. A run that writes anything to stderr fails:
    a README shows its example's whole output, stray warnings included.

    Raises:
        ExampleScriptError: The README (section) has no tested block or more than one, a run
            exited non-zero, or a run wrote to stderr.

    Example:
        >>> import tempfile
        >>> directory = Path(tempfile.mkdtemp())
        >>> readme = directory / "README.md"
        >>> _ = readme.write_text("## Example\\n```python\\nprint('hi')\\n```\\n")
        >>> readme_example_lines(readme, directory, "Example")
        [['hi'], ['hi']]
    """
    blocks = readme_python_blocks(readme, heading)
    if len(blocks) != 1:
        where = f"'## {heading}' of {readme.name}" if heading else readme.name
        raise ExampleScriptError(f"{where} has {len(blocks)} tested python blocks, not one")
    done = run_readme_example(blocks[0], directory, runs=runs, file_name=file_name, env=env)
    for number, run in enumerate(done, start=1):
        if run.stderr:
            raise ExampleScriptError(
                f"run {number} of the example in {readme.name} wrote to stderr:\n"
                f"{run.stderr[-_STDERR_TAIL_CHARS:]}"
            )
    return [run.stdout.splitlines() for run in done]


def readme_shown_output(readme: Path, heading: str | None = None) -> list[list[str]]:
    """The output a README shows for its example: the lines of each ```` ```text ```` block of
    the file (of its ``## heading`` section with ``heading``), one block for each run it shows.

    Raises:
        ExampleScriptError: The file has no ``## heading`` line, or it shows no output.

    Example:
        >>> import tempfile
        >>> readme = Path(tempfile.mkdtemp()) / "README.md"
        >>> _ = readme.write_text("```python\\nprint(1)\\n```\\nIt prints:\\n```text\\n1\\n```\\n")
        >>> readme_shown_output(readme)
        [['1']]
    """
    text = readme.read_text()
    if heading is not None:
        text = _section(text, heading, readme)
    shown = [
        body.splitlines() for language, _, body in _FENCED_BLOCK.findall(text) if language == "text"
    ]
    if not shown:
        where = f"'## {heading}' of {readme.name}" if heading else readme.name
        raise ExampleScriptError(f"{where} shows no output (a ```text block)")
    return shown


def check_readme_example_output(
    readme: Path,
    directory: Path,
    heading: str | None = None,
    *,
    file_name: str = "readme_example.py",
    env: Mapping[str, str] | None = None,
) -> list[list[str]]:
    """Run a README's one tested example once for each output block it shows
    (:func:`readme_shown_output`), in ``directory``, and check that each run printed its block.

    The runs share ``directory``, so a README that shows two blocks shows what a second run, which
    meets the first run's database, prints. As with :func:`readme_example_lines`, a run that
    writes to stderr fails. Returns the lines each run printed.

    Raises:
        ExampleScriptError: The README shows no output, has no tested example or more than one,
            a run failed or wrote to stderr, or a run printed other lines than its block (the
            message shows both).

    Example:
        >>> import tempfile
        >>> directory = Path(tempfile.mkdtemp())
        >>> readme = directory / "README.md"
        >>> _ = readme.write_text("```python\\nprint('hi')\\n```\\n```text\\nhi\\n```\\n")
        >>> check_readme_example_output(readme, directory)
        [['hi']]
    """
    shown = readme_shown_output(readme, heading)
    printed = readme_example_lines(
        readme, directory, heading, runs=len(shown), file_name=file_name, env=env
    )
    for number, (expected, lines) in enumerate(zip(shown, printed, strict=True), start=1):
        if lines != expected:
            raise ExampleScriptError(
                f"run {number} of the example in {readme.name} printed other lines than the "
                f"README shows:\nshown:\n" + "\n".join(expected) + "\nprinted:\n" + "\n".join(lines)
            )
    return printed


def printed_section(output: str, heading: str) -> list[str]:
    """The lines a script printed under ``heading``, a line of its own such as
    ``Stored messages:``: the indented (or blank) lines after it, up to the next line that is not
    indented, without trailing blank lines.

    Raises:
        ExampleScriptError: ``output`` has no line ``heading``.

    Example:
        >>> printed_section("Events:\\n  turn_started\\n  turn_completed\\nDone.\\n", "Events:")
        ['  turn_started', '  turn_completed']
    """
    lines = output.splitlines()
    if heading not in lines:
        raise ExampleScriptError(
            f"the output has no line {heading!r}:\n{output[-_STDERR_TAIL_CHARS:]}"
        )
    section: list[str] = []
    for line in lines[lines.index(heading) + 1 :]:
        if line and not line[0].isspace():
            break
        section.append(line)
    while section and not section[-1].strip():
        section.pop()
    return section


def _section(text: str, heading: str, readme: Path) -> str:
    match = re.search(rf"^## {re.escape(heading)}[ \t]*$", text, re.MULTILINE)
    if match is None:
        raise ExampleScriptError(f"{readme.name} has no '## {heading}' section")
    end = text.find("\n## ", match.end())
    return text[match.end() : end if end >= 0 else len(text)]
