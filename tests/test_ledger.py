import pytest

from transformer_lib.ledger import Text, claim_keys, claim_label, find_claims, record_claim


def test_record_claim_summary_without_glue(capsys):
    line = record_claim("08_var_qk", "Var(qk) = d_k", "1.01 d_k", "confirmed", glue=False)
    assert line == "[confirmed] Var(qk) = d_k — measured: 1.01 d_k"
    assert line in capsys.readouterr().out


def test_keys_and_label():
    assert claim_keys("06_minus_1e5") == ("claim_06_minus_1e5_text", "claim_06_minus_1e5_value",
                                          "claim_06_minus_1e5_verdict")
    assert claim_label("06_minus_1e5") == "claim-06-minus-1e5"


def test_text_displays_without_quotes():
    assert repr(Text("a b")) == "a b" and Text("x")._repr_markdown_() == "x"


def test_find_claims_in_notebook_json():
    nb = {"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "display_data", "metadata": {"scrapbook": {"name": "claim_02_grad_text"}}},
        {"output_type": "display_data", "metadata": {"scrapbook": {"name": "claim_02_grad_value"}}},
        {"output_type": "display_data", "metadata": {"scrapbook": {"name": "c02_other"}}}]}]}
    assert find_claims(nb) == ["02_grad"]


@pytest.mark.parametrize("args, match", [
    (("2_x", "c", "v", "confirmed"), "claim_id must look like"),
    (("02_x", "", "v", "confirmed"), "claim must be a non-empty str"),
    (("02_x", "c", "v", "true"), "verdict must be one of"),
])
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        record_claim(*args, glue=False)
