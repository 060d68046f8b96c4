#!/usr/bin/env python3
"""Checks the contract examples against docs/*.schema.json.

  check-schemas.py                 valid job examples pass, invalid ones fail, outcome examples pass, and so does
                                   each ```json block of README.md marked `<!-- schema: job -->` or `outcome`
  check-schemas.py outcome FILE    every line of FILE (JSON) is a valid outcome ("-" = stdin)
"""
import json
import pathlib
import re
import sys

import jsonschema

root = pathlib.Path(__file__).resolve().parent.parent
docs = root / "docs"


def validator(name):
    schema = json.loads((docs / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def readme_blocks():
    """The README's example documents: (schema name, parsed JSON) for each marked ```json block."""
    text = (root / "README.md").read_text()
    marked = r"<!-- schema: (job|outcome) -->\n```json\n(.*?)\n```"
    return [(kind, json.loads(body)) for kind, body in re.findall(marked, text, re.S)]


def main():
    problems = []
    if len(sys.argv) == 3:
        check = validator(sys.argv[1])
        stream = sys.stdin if sys.argv[2] == "-" else open(sys.argv[2])
        count = 0
        for line in stream:
            if not line.strip():
                continue
            count += 1
            for error in check.iter_errors(json.loads(line)):
                problems.append(f"line {count}: {error.message}")
        if count == 0:
            problems.append("no documents to check")
    else:
        job = validator("job")
        outcome = validator("outcome")
        for path in sorted((docs / "examples/jobs/valid").glob("*.json")):
            for error in job.iter_errors(json.loads(path.read_text())):
                problems.append(f"{path.name}: {error.message}")
        for path in sorted((docs / "examples/jobs/invalid").glob("*.json")):
            if job.is_valid(json.loads(path.read_text())):
                problems.append(f"{path.name}: schema accepts an invalid job")
        for path in sorted((docs / "examples/outcomes").glob("*.json")):
            for error in outcome.iter_errors(json.loads(path.read_text())):
                problems.append(f"{path.name}: {error.message}")
        blocks = readme_blocks()
        if {kind for kind, _ in blocks} != {"job", "outcome"}:
            problems.append("README.md: expected marked ```json blocks of a job and its outcomes")
        for number, (kind, document) in enumerate(blocks, 1):
            for error in (job if kind == "job" else outcome).iter_errors(document):
                problems.append(f"README.md block {number} ({kind}): {error.message}")
    for problem in problems:
        print(problem)
    sys.exit(1 if problems else 0)


main()
