"""--kubeconfig files that are no kubeconfig: one line naming the flag and the file, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.kube.connect import api_client


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("root:x:0:0:root:/root:/bin/bash\n", "not a kubeconfig (a YAML str;"),  # /etc/passwd
        ("- a\n- b\n", "not a kubeconfig (a YAML list;"),
        ("a: &x [*x]\n", "not YAML"),
        ("", "not a kubeconfig (a YAML NoneType;"),
    ],
)
def test_a_file_that_is_no_kubeconfig_is_named_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    """The client's own loader raised TypeError ('str' object does not support item assignment) on a
    text file such as /etc/passwd: ``caldera mirror --kubeconfig /etc/passwd`` ended in a traceback."""
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(ValueError, match="^--kubeconfig: ") as e:
        api_client(str(path), None)
    assert message in str(e.value) and "\n" not in str(e.value)
