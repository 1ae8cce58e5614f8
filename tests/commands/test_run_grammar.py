"""`ember run --grammar / --grammar-file / --json-schema`: the printed text is a sentence of
the grammar (JSON the schema accepts), and a schema the grammar cannot enforce says so."""
from __future__ import annotations

import json

import jsonschema
import pytest

from ember.commands import cli

pytestmark = pytest.mark.native


def test_json_schema_output_validates(starter_model_path, capsys, tmp_path):
    schema = {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 2,
              "maxItems": 4}
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    assert cli.main(["run", "-m", str(starter_model_path), "-p", "Colours:", "-n", "60",
                     "--seed", "3", "-j", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "stop: eog" in err
    jsonschema.validate(json.loads(out), schema)


def test_grammar_output_is_a_sentence(starter_model_path, capsys, tmp_path):
    gbnf = tmp_path / "answer.gbnf"
    gbnf.write_text('root ::= " " ("yes" | "no") "."\n')
    assert cli.main(["run", "-m", str(starter_model_path), "-p", "Is fire hot? Answer:",
                     "-n", "8", "--temp", "1", "--grammar-file", str(gbnf)]) == 0
    assert capsys.readouterr().out in (" yes.\n", " no.\n")


def test_an_unenforceable_schema_says_why(starter_model_path):
    with pytest.raises(SystemExit, match="'multipleOf' is not supported"):
        cli.main(["run", "-m", str(starter_model_path), "-p", "x",
                  "-j", '{"type": "integer", "multipleOf": 2}'])
