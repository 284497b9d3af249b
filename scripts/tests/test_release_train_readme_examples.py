"""Every adapter's README has the complete example the release check runs from its wheel."""

from __future__ import annotations

from pathlib import Path

from release_train import published_packages
from release_train._readme_example import README_ENGINE_ADDRESS, readme_example


def test_every_adapter_readme_has_an_example_program() -> None:
    adapters = [member for member in published_packages() if member.is_adapter]

    assert adapters
    for member in adapters:
        example = readme_example(member.readme)
        assert example is not None, f"{member.readme} has no example section with a python block"
        compile(example.source, str(member.readme), "exec")
        assert "asyncio.run(" in example.source, f"{member.readme}'s example runs nothing"


def test_the_example_is_the_first_python_block_of_its_section(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        "# x\n\n```python\nintro = 1\n```\n\n"
        "## Example\n\nStart an engine.\n\n```bash\ndex-local-engine serve\n```\n\n"
        f'```python\nSERVER = "{README_ENGINE_ADDRESS}"\n```\n\n'
        "```python\nsecond = 2\n```\n\n## MCP\n\n```python\nmcp = 3\n```\n"
    )

    example = readme_example(readme)

    assert example is not None
    assert (example.heading, example.source) == ("Example", f'SERVER = "{README_ENGINE_ADDRESS}"\n')
    assert example.needs_engine
    assert example.connected_to("127.0.0.1:40001") == 'SERVER = "127.0.0.1:40001"\n'


def test_a_readme_without_an_example_section_or_only_notest_blocks_has_none(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        "# x\n\n```python\nintro = 1\n```\n\n## A complete example\n\n```python notest\nx = 1\n```\n"
    )

    assert readme_example(readme) is None
