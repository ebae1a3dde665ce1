"""Every limit skillgrove enforces on what it reads, in one place.

A library is input from strangers: a skill downloaded from a marketplace, a group file written by
someone else, the output of a skill. Each limit below bounds how much memory or time one input can
make skillgrove spend, and each one, when crossed, becomes a diagnostic or an error that names the
constant (a load reports ``[limit-exceeded]``, with ``(limit NAME)`` in the message) instead of a
crash or a hang. The values are far above anything a real library needs; raise one here if a real
library hits it.

This module holds constants only, so that any layer can import it for free.
"""

from __future__ import annotations

# --------------------------------------------------------------------------- files and folders

GROUP_FILE_MAX_BYTES = 1024 * 1024
"""A group file larger than this is not read (SKILL.md has its own limit, ``SafetyPolicy``'s
``max_file_bytes``)."""

COMPANION_MAX_BYTES = 1024 * 1024
"""A script or reference file of a skill larger than this is not scanned, and rejects the skill
(the safety scan cannot vouch for what it did not read)."""

SKILL_ID_MAX_BYTES = 256
"""The ``.skill_id`` sidecar holds one short id; anything longer is ignored, not read."""

LIBRARY_MAX_DEPTH = 64
"""Folders nested deeper than this below a library root are not searched (and reported)."""

LIBRARY_MAX_ENTRIES = 1_000_000
"""Files and folders one library root may hold; a walk stops, reported, after this many."""

# ------------------------------------------------------------------------------------------- YAML

YAML_MAX_DEPTH = 64
"""Lists and mappings nested deeper than this in frontmatter or a group file are refused."""

YAML_MAX_NODES = 200_000
"""Values in one YAML document, counting every use of an alias (``*name``) as a full copy of
what it names: a few hundred bytes of nested aliases would otherwise expand to gigabytes."""

YAML_MAX_NUMBER_CHARS = 1_000
"""An integer or float written with more characters than this is refused rather than read
(Python refuses to read integers of more than 4,300 digits at all)."""

# ----------------------------------------------------------------------------------------- groups

GROUP_MAX_STEPS = 1_000
"""Steps in one group. Checking a group is linear in its steps, but a run keeps state per step."""

GROUP_MAX_NESTING = 32
"""Groups calling groups calling groups: the longest chain of sub-group steps allowed."""

HINT_MAX_COMPARISONS = 20_000
"""Work spent on ``did you mean`` hints for the step and skill names of one group file: a hint
compares the wrong name with every candidate, so after this many comparisons the remaining
unknown names are still reported, without a hint."""

DURATION_MAX_SECONDS = 86_400.0
"""The longest ``timeout`` or retry interval (one day). Durations must also be finite and > 0."""

RETRY_MAX_ATTEMPTS = 100
"""The most attempts a ``retry`` may ask for."""

RETRY_MAX_BACKOFF_FACTOR = 10.0
"""The largest ``retry.backoff_factor`` (with ``RETRY_MAX_ATTEMPTS`` the delays stay finite)."""

# ------------------------------------------------------------------------------------ JSON Schema

SCHEMA_PATTERN_MAX_SUBJECT = 1_000
"""Defaults and literal parameters are checked against a schema's ``pattern`` at load time only
when every string in the value is at most this long; otherwise that check is skipped, with a
warning. Together with the next rule this keeps a regular expression from taking seconds (or
forever) to match while a library loads."""

SCHEMA_CHECK_MAX_WORK = 2_000_000
"""A default (or literal parameter) is checked against its schema at load time only when the
value's size times the schema's size (plus the value's size squared if the schema asks for
``uniqueItems``) stays under this; otherwise the check is skipped, with a warning."""

# Patterns whose repetitions nest (``(a+)+``, ``(a|aa)*``) are never matched at load time: they can
# backtrack exponentially. See ``skills.loader.risky_pattern``.

# ------------------------------------------------------------------------------- what skills return
# The limits from here on apply while a group runs or is planned: a step whose output crosses
# one fails with the limit's name (and the run is recorded), an expression gets an
# ExpressionError at the place that crossed it.

JSON_MAX_DEPTH = 64
"""Arrays and objects nested deeper than this in a skill's JSON output (stdout or an HTTP
response), or in a string ``fromJSON`` reads, are refused before the text is parsed: the step
fails and says so. Parsing, schema checks and the run log all recurse into a value."""

JSON_MAX_NUMBER_CHARS = 1_000
"""A number in that JSON written with more characters than this is refused (Python refuses to
read integers of more than 4,300 digits at all, and every later use would fail on them)."""

# ---------------------------------------------------------------------------- ${{ }} expressions

EXPRESSION_MAX_CHARS = 20_000
"""The text inside one ``${{ }}``; a longer expression is a syntax error. It also bounds every
string literal."""

EXPRESSION_MAX_DEPTH = 64
"""How deeply an expression may nest: parentheses, brackets, calls, ``!`` and ``-``, property
access and chains of operators (``a + b + c`` is three levels) all count. Deeper is a syntax
error, found while parsing, long before Python's own recursion limit."""

EXPRESSION_MAX_NUMBER_CHARS = 1_000
"""A number literal written with more characters than this is a syntax error; so is one too
large to be a finite float (``1e999``)."""

EXPRESSION_MAX_RESULT_CHARS = 16 * 1024 * 1024
"""The longest string an expression may build (``+``, ``format``, ``join``, ``toJSON``,
``string``, text around ``${{ }}``), and the longest JSON text ``fromJSON`` reads. Sizes are
worked out before the string is built, so ``format`` nested ten deep fails at once instead of
allocating gigabytes. It is above the 10 MiB a skill may print, so any one output fits."""

EXPRESSION_MAX_ITEMS = 1_000_000
"""The most items a list built by ``+`` may hold, and the most values (counting every nested
one) ``toJSON`` and ``string`` will write as text."""

EXPRESSION_MAX_EVALUATION_BYTES = 48 * 1024 * 1024
"""The memory all the strings, lists and objects that one evaluation of an expression builds
may take together (``sys.getsizeof`` of each, intermediate ones included): sixty-six
``format()`` calls in one list each stay under ``EXPRESSION_MAX_RESULT_CHARS``, together they
do not. Room for one string of the largest size, in the widest characters."""

EXPRESSION_MAX_EVALUATION_ITEMS = 2_000_000
"""The list and object entries one evaluation may build together."""

EXPRESSION_MAX_STEP_BYTES = 128 * 1024 * 1024
"""What every expression of one step's ``with`` (or of a plan's preview of a step) may build
together: two hundred large values each under the evaluation budget are still refused."""

EXPRESSION_MAX_STEP_ITEMS = 4_000_000
"""The list and object entries all the expressions of one step's ``with`` may build."""
