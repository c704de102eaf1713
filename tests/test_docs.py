
import pytest

from tvm_cdna4 import docs_gen


@pytest.mark.skipif(not (docs_gen.DOCS / "catalog.md.in").exists(), reason="not a source checkout")
def test_catalog_doc_is_current():
    assert (docs_gen.DOCS / "catalog.md").read_text() == docs_gen.render(), "run: python -m tvm_cdna4.docs_gen"
