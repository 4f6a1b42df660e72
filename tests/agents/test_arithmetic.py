"""The calculator's evaluator: values, messages, limits, and properties over random input."""

from __future__ import annotations

import contextlib
import math
import time
from datetime import timedelta
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.builtin.arithmetic import (
    DEFAULT_LIMITS,
    ArithmeticInputError,
    Limits,
    Number,
    evaluate,
    extract_expression,
    format_number,
)
from tests.support import within

KNOWN = "; known functions: abs, ceil, cos, exp, floor, ln, log, max, min, round, sin, sqrt, tan; constants: e, pi"


def error_of(expression: str, limits: Limits = DEFAULT_LIMITS) -> ArithmeticInputError:
    with pytest.raises(ArithmeticInputError) as caught:
        evaluate(expression, limits)
    return caught.value


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # precedence and associativity
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("10 - 4 - 3", 3),
        ("64 / 4 / 2", 8),
        ("2 * 3 % 4", 2),
        ("7 // 2 * 2", 6),
        ("2 ^ 3 ^ 2", 512),
        ("2 ** 3 ** 2", 512),
        ("(2 ^ 3) ^ 2", 64),
        ("2 * 3 ^ 2", 18),
        # unary minus against power
        ("-2^2", -4),
        ("-2**2", -4),
        ("(-2)^2", 4),
        ("2^-1", Fraction(1, 2)),
        ("2^-2^2", Fraction(1, 16)),
        ("-2^-2", Fraction(-1, 4)),
        ("--3", 3),
        ("+-+3", -3),
        ("2 * -3", -6),
        ("2 - -3", 5),
        # exact rationals
        ("0.1 + 0.2", Fraction(3, 10)),
        ("1/3 * 3", 1),
        ("1/3 + 1/6", Fraction(1, 2)),
        ("2/4", Fraction(1, 2)),
        ("7 / 2", Fraction(7, 2)),
        ("7 // 2", 3),
        ("-7 // 2", -4),
        ("-7 % 3", 2),
        ("7 % -3", -2),
        ("7.5 % 2", Fraction(3, 2)),
        ("0^0", 1),
        ("4^(1/2)", 2),
        ("8^(1/3)", 2),
        ("1000^(1/3)", 10),
        ("(27/8)^(2/3)", Fraction(9, 4)),
        ("(-8)^(1/3)", -2),
        ("(-8)^(2/3)", 4),
        ("(-27/8)^(-1/3)", Fraction(-2, 3)),
        ("(-2)^(1/3)", -(2 ** (1 / 3))),
        ("2^(1/3)", 2 ** (1 / 3)),
        ("2^10", 1024),
        ("2^-10", Fraction(1, 1024)),
        ("(-1)^(10^999)", 1),
        # number syntax
        ("1_000_000 + 1", 1000001),
        (".5", Fraction(1, 2)),
        ("5.", 5),
        ("1.5e3", 1500),
        ("1.5E3", 1500),
        ("2.5e-1", Fraction(1, 4)),
        ("1e+2", 100),
        ("1_0.2_5", Fraction(41, 4)),
        ("007", 7),
        ("0e99999", 0),
        # other spellings and whitespace
        ("6 × 7", 42),
        ("84 ÷ 2", 42),
        ("50 − 8", 42),
        ("\t 6*7 \n", 42),
        # functions, exact where the result is
        ("sqrt(16)", 4),
        ("sqrt(9/4)", Fraction(3, 2)),
        ("sqrt(2)", math.sqrt(2)),
        ("abs(-3.5)", Fraction(7, 2)),
        ("round(2.5)", 3),
        ("round(-2.5)", -3),
        ("round(2.4)", 2),
        ("round(3.14159, 2)", Fraction(157, 50)),
        ("round(1250, -2)", 1300),
        ("round(sqrt(2), 3)", Fraction(1414, 1000)),
        ("floor(-1.5)", -2),
        ("ceil(1.2)", 2),
        ("floor(sqrt(10))", 3),
        ("min(3, 1, 2)", 1),
        ("max(1, 5/2)", Fraction(5, 2)),
        ("max(2)", 2),
        ("log(1000)", 3),
        ("log(0.001)", -3),
        ("log(8, 2)", 3),
        ("log(1/8, 2)", -3),
        ("log(2)", math.log(2) / math.log(10)),
        ("log(10^999)", 999),
        ("ln(1)", 0.0),
        ("exp(0)", 1.0),
        ("exp(1)", math.exp(1)),
        ("sin(0)", 0.0),
        ("cos(0)", 1.0),
        ("tan(0)", 0.0),
        ("SQRT(16)", 4),
        # constants
        ("pi", math.pi),
        ("e", math.e),
        ("2 * PI", 2 * math.pi),
        ("ln(e)", 1.0),
        ("e^2", math.e**2),
        ("2^0.5", 2**0.5),
    ],
)
def test_values(expression: str, expected: Number) -> None:
    result = evaluate(expression)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("ln(1.0000001)", math.log1p(1e-7)),  # exact input keeps its digits
        ("log(1/3)", math.log10(1 / 3)),
        ("ln(10^500)", 500 * math.log(10)),  # too big for a float, not for math.log of an int
        ("ln(10^-500)", -500 * math.log(10)),
        ("sin(pi / 2)", 1.0),
        ("cos(pi)", -1.0),
    ],
)
def test_float_functions_are_accurate(expression: str, expected: float) -> None:
    assert evaluate(expression) == pytest.approx(expected, rel=1e-14)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (42, "42"),
        (-7, "-7"),
        (2**100, "1267650600228229401496703205376"),
        (Fraction(4, 2), "2"),
        (Fraction(1, 8), "0.125"),
        (Fraction(-3, 10), "-0.3"),
        (Fraction(1, 3), "0.333333333333333"),
        (Fraction(2, 3), "0.666666666666667"),
        (Fraction(1, 1024), "0.0009765625"),
        (Fraction(1, 10**6), "0.000001"),
        (Fraction(3, 2 * 10**20), "1.5e-20"),
        (Fraction(10**20 + 1, 2), "5e+19"),
        (Fraction(10**14 + 1, 10), "10000000000000.1"),
        (math.sqrt(2), "1.4142135623731"),
        (math.sqrt(2) ** 2, "2"),
        (4.0, "4"),
        (-0.0, "0"),
        (0.1 + 0.2, "0.3"),
        (1e20, "1e+20"),
        (1.2246467991473532e-16, "1.22464679914735e-16"),
    ],
)
def test_format_number(value: Number, text: str) -> None:
    assert format_number(value) == text


def test_format_number_of_results() -> None:
    assert format_number(evaluate("1/3")) == "0.333333333333333"
    assert format_number(evaluate("0.1 + 0.2")) == "0.3"
    assert format_number(evaluate("2^100")) == str(2**100)


@pytest.mark.parametrize(
    ("text", "expression"),
    [
        ("What is 2+2?", "2+2"),
        ("what is 2 + 2", "2 + 2"),
        ("WHAT   IS 2+2 ?", "2+2"),
        ("What's 6×7?", "6×7"),
        ("what’s 6×7?", "6×7"),
        ("Calculate: 1/3", "1/3"),
        ("calculate 1/3 =", "1/3"),
        ("Compute 2^10", "2^10"),
        ("evaluate sqrt(2) = ?", "sqrt(2)"),
        ("evaluate(2)", "(2)"),
        ("  2 + 2 =  ", "2 + 2"),
        ("2+2", "2+2"),
        ("computers 2", "computers 2"),  # a prefix is a whole word
        ("what is", ""),
        ("", ""),
    ],
)
def test_extract_expression(text: str, expression: str) -> None:
    assert extract_expression(text) == expression


def test_extracted_requests_evaluate() -> None:
    assert evaluate(extract_expression("What is 2+2?")) == 4
    assert evaluate(extract_expression("Calculate 0.1 + 0.2 =")) == Fraction(3, 10)


@pytest.mark.parametrize(
    ("expression", "message", "position"),
    [
        # syntax
        ("", "empty expression at position 0", 0),
        ("   ", "empty expression at position 0", 0),
        ("1 +", "unexpected end of input at position 3; expected a number, a name or '('", 3),
        ("(1 + 2", "unexpected end of input at position 6; expected ')' to close '(' at position 0", 6),
        ("sqrt(2, 3", "unexpected end of input at position 9; expected ')' to close '(' at position 4", 9),
        ("(1 + 2))", "unexpected ')' at position 7; it closes no '('", 7),
        ("1 * )", "unexpected ')' at position 4; expected a number, a name or '('", 4),
        ("1, 2", "unexpected ',' at position 1; expected an operator or the end of the expression", 1),
        ("2 * * 3", "unexpected '*' at position 4; expected a number, a name or '('", 4),
        ("()", "unexpected ')' at position 1; expected a number, a name or '('", 1),
        ("2(3)", "missing operator before '(' at position 1; implicit multiplication is not supported, write '*'", 1),
        ("2 3", "missing operator before '3' at position 2; implicit multiplication is not supported, write '*'", 2),
        ("2pi", "missing operator before 'pi' at position 1; implicit multiplication is not supported, write '*'", 1),
        ("(1)(2)", "missing operator before '(' at position 3; implicit multiplication is not supported, write '*'", 3),
        ("pi(2)", "missing operator before '(' at position 2; implicit multiplication is not supported, write '*'", 2),
        # characters and numbers
        ("2 + 2 =", "unexpected character '=' at position 6", 6),
        ("2 $ 3", "unexpected character '$' at position 2", 2),
        ("3!", "unexpected character '!' at position 1", 1),
        ("2²", "unexpected character '²' at position 1", 1),
        ("1.2.3", "malformed number '1.2.3' at position 0", 0),
        ("1 + 1__0", "malformed number '1__0' at position 4", 4),
        ("1_", "malformed number '1_' at position 0", 0),
        ("1e+", "malformed number '1e' at position 0", 0),
        ("1e5e5", "malformed number '1e5e5' at position 0", 0),
        # names and calls
        ("foo", f"unknown name 'foo' at position 0{KNOWN}", 0),
        ("2 * x + 1", f"unknown name 'x' at position 4{KNOWN}", 4),
        ("sqrt", "missing '(' after 'sqrt' at position 4; write sqrt(x)", 4),
        ("sqrt 4", "missing '(' after 'sqrt' at position 5; write sqrt(x)", 5),
        ("sqrt(1, 2)", "sqrt() takes 1 argument, got 2 at position 0", 0),
        ("1 + log(1, 2, 3)", "log() takes 1 or 2 arguments, got 3 at position 4", 4),
        ("max()", "max() takes at least 1 argument, got 0 at position 0", 0),
        ("max(1,)", "unexpected ')' at position 6; expected a number, a name or '('", 6),
        # arithmetic
        ("1 / 0", "division by zero at position 2 ('/')", 2),
        ("10 ÷ (2 - 2)", "division by zero at position 3 ('÷')", 3),
        ("1 // 0", "division by zero at position 2 ('//')", 2),
        ("1 % 0", "division by zero at position 2 ('%')", 2),
        ("1 / sin(0)", "division by zero at position 2 ('/')", 2),
        ("0 ^ -1", "division by zero at position 2 ('^': zero to a negative power)", 2),
        ("sqrt(-1)", "square root of a negative number at position 0 ('sqrt')", 0),
        ("(-4)^(1/2)", "even root of a negative number at position 4 ('^')", 4),
        ("(-2)^pi", "fractional power of a negative number at position 4 ('^')", 4),
        ("log(0)", "logarithm of a non-positive number at position 0 ('log')", 0),
        ("ln(-1)", "logarithm of a non-positive number at position 0 ('ln')", 0),
        ("log(8, 1)", "invalid logarithm base at position 0 ('log': it must be positive and not 1)", 0),
        ("log(8, 0)", "invalid logarithm base at position 0 ('log': it must be positive and not 1)", 0),
        ("log(8, 1 + 10^-999)", "invalid logarithm base at position 0 ('log': too close to 1)", 0),
        ("round(2, 0.5)", "round() needs a whole number of digits at position 0 ('round')", 0),
        # size
        ("9^9^9", "number too large at position 1 ('^': more than 1000 digits)", 1),
        ("2**100000", "number too large at position 1 ('**': more than 1000 digits)", 1),
        ("0.5^100000", "number too precise at position 3 ('^': denominator of more than 1000 digits)", 3),
        ("10^999 * 10", "number too large at position 7 ('*': more than 1000 digits)", 7),
        ("1e1000", "number too large at position 0 ('1e1000': more than 1000 digits)", 0),
        ("1e-1000", "number too precise at position 0 ('1e-1000': denominator of more than 1000 digits)", 0),
        ("1e999999999", "number too large at position 0 ('1e999999999': more than 1000 digits)", 0),
        ("round(1, 1000)", "number too large at position 0 ('round': more than 1000 digits)", 0),
        ("exp(1000)", "floating-point overflow at position 0 ('exp')", 0),
        ("exp(700) * exp(700)", "floating-point overflow at position 9 ('*')", 9),
        ("pi * 10^999", "floating-point overflow at position 3 ('*')", 3),
        ("sin(10^999)", "floating-point overflow at position 0 ('sin': number too large for this function)", 0),
        ("(10^400 + 1)^(1/2)", "floating-point overflow at position 12 ('^': number too large for this function)", 12),
        ("sqrt(10^400 + 1)", "floating-point overflow at position 0 ('sqrt': number too large for this function)", 0),
        ("2 ^ 1e400 ^ 0.5", "number too large at position 2 ('^': more than 1000 digits)", 2),
    ],
)
def test_errors_name_the_problem_and_position(expression: str, message: str, position: int) -> None:
    error = error_of(expression)
    assert str(error) == message
    assert error.position == position
    assert isinstance(error, ValueError)


def test_error_carries_the_problem_apart() -> None:
    error = error_of("1 / 0")
    assert (error.problem, error.position) == ("division by zero", 2)


def test_the_first_problem_in_reading_order_is_reported() -> None:
    # Tokens are read on demand: the bad character after the unknown name is never reached.
    assert error_of("foo $").position == 0
    assert error_of("1 + ) $").position == 4
    # Syntax is checked before anything is computed.
    assert str(error_of("1/0 +")).startswith("unexpected end of input at position 5")


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("eval(1)", f"unknown name 'eval' at position 0{KNOWN}"),
        ("exec('1')", f"unknown name 'exec' at position 0{KNOWN}"),
        ("compile(1)", f"unknown name 'compile' at position 0{KNOWN}"),
        ("__import__('os')", f"unknown name '__import__' at position 0{KNOWN}"),
        ("__builtins__", f"unknown name '__builtins__' at position 0{KNOWN}"),
        ("a.b", f"unknown name 'a' at position 0{KNOWN}"),
        ("pi.real", "unexpected character '.' at position 2"),
        ("(1).__class__", "unexpected character '.' at position 3"),
        ("1 .__class__", "unexpected character '.' at position 2"),
        ("sqrt.__globals__", "unexpected character '.' at position 4"),
        ("[1]", "unexpected character '[' at position 0"),
        ("'1'", 'unexpected character "\'" at position 0'),
        ("lambda: 1", f"unknown name 'lambda' at position 0{KNOWN}"),
    ],
)
def test_python_is_out_of_reach(expression: str, message: str) -> None:
    assert str(error_of(expression)) == message


# --- limits -------------------------------------------------------------------------------


def test_length_limit() -> None:
    assert evaluate("1" * 1000) == int("1" * 1000)
    error = error_of("1" * 1001)
    assert str(error) == "expression longer than 1000 characters at position 1000"
    assert str(error_of("1 + 1", Limits(max_length=4))) == "expression longer than 4 characters at position 4"


def test_token_limit() -> None:
    assert evaluate("+".join("1" * 250)) == 250  # 499 tokens
    error = error_of("+".join("1" * 251))  # 501 tokens
    assert str(error) == "too many tokens at position 500 (limit 500)"
    assert str(error_of("1 + 2", Limits(max_tokens=2))) == "too many tokens at position 4 (limit 2)"


def test_depth_limit() -> None:
    assert evaluate("(" * 100 + "7" + ")" * 100) == 7
    assert evaluate("sqrt(" * 100 + "1" + ")" * 100) == 1
    assert str(error_of("(" * 101 + "7" + ")" * 101)) == "nesting too deep at position 100 (limit 100 levels)"
    assert str(error_of("abs(" * 101 + "7" + ")" * 101)) == "nesting too deep at position 403 (limit 100 levels)"
    assert error_of("((1))", Limits(max_depth=1)).position == 1


def test_digit_limit() -> None:
    small = Limits(max_digits=3)
    assert evaluate("999 + 0", small) == 999
    assert str(error_of("999 + 1", small)) == "number too large at position 4 ('+': more than 3 digits)"
    precise = "number too precise at position 5 ('/': denominator of more than 3 digits)"
    assert str(error_of("1/500/2", small)) == precise
    assert evaluate("10^999") == 10**999
    assert str(error_of("10^1000")) == "number too large at position 2 ('^': more than 1000 digits)"


@given(depth=st.integers(101, 333))
def test_deep_nesting_is_refused_without_recursion_error(depth: int) -> None:
    for opening in ("(", "sqrt(", "-("):
        expression = opening * depth + "1" + ")" * depth
        error = error_of(expression[:1000])
        assert error.problem == "nesting too deep"


def test_long_chains_need_no_stack() -> None:
    wide = Limits(max_length=10_000, max_tokens=10_000)
    assert evaluate("-" * 5000 + "1", wide) == 1
    assert evaluate("1^" * 3000 + "1", wide) == 1
    assert evaluate("1" + "-1" * 3000, wide) == -2999


@pytest.mark.parametrize(
    "expression",
    [
        "9^9^9^9",
        "2^2^2^2^2^2",
        "(10^999)^(1/99)",
        "(10^999 - 1)^(1/97)",
        "(10^999 + 1) / (10^998 + 7) * (10^997 - 3) / (10^996 + 11)",
        "log(10^999 + 1, 1 + 10^-998)",
        "round(sqrt(2), 999)",
        "floor(exp(709))",
        "sqrt(" * 100 + "10^999" + ")" * 100,
        "(1/3)^(" * 50 + "2" + ")" * 50,
        "max(" + ",".join(["10^999 / 7"] * 49) + ")",
        "(" * 100 + "2" + "^2" * 140 + ")" * 100,
        "-" * 499 + "1",
        "1e" + "9" * 998,
        "1" * 1000,
    ],
)
def test_adversarial_inputs_finish_fast(expression: str) -> None:
    # The guard bounds the work (a naive evaluator spends minutes or all memory on these);
    # the test asserts only that it ends far from that.
    start = time.perf_counter()
    with contextlib.suppress(ArithmeticInputError):
        evaluate(expression)
    assert time.perf_counter() - start < within(0.5)


# --- properties ---------------------------------------------------------------------------

Tree = int | tuple[str, "Tree"] | tuple[str, "Tree", "Tree"] | tuple[str, "Tree", int]
PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2, "neg": 3, "^": 4}
ATOM = 5


def trees(operators: list[str], powers: bool = False) -> st.SearchStrategy[Tree]:
    def extend(children: st.SearchStrategy[Tree]) -> st.SearchStrategy[Tree]:
        nodes = [st.tuples(st.just("neg"), children), st.tuples(st.sampled_from(operators), children, children)]
        if powers:
            nodes.append(st.tuples(st.just("^"), children, st.integers(-3, 3)))
        return st.one_of(nodes)

    return st.recursive(st.integers(0, 20), extend, max_leaves=12)


def render(tree: Tree, space: str) -> tuple[str, int]:
    """The tree as text with only the parentheses its shape needs, and its precedence."""
    if isinstance(tree, int):
        return str(tree), ATOM
    if tree[0] == "neg":
        text, precedence = render(tree[1], space)
        return "-" + (text if precedence >= PRECEDENCE["neg"] else f"({text})"), PRECEDENCE["neg"]
    op, left, right = tree
    mine = PRECEDENCE[op]
    left_text, left_precedence = render(left, space)
    right_text, right_precedence = render(right, space)
    if op == "^":  # the base binds tighter than any sign; the exponent may carry one
        left_text = left_text if left_precedence == ATOM else f"({left_text})"
    else:  # left-associative: an equal operator on the right needs parentheses
        left_text = left_text if left_precedence >= mine else f"({left_text})"
        right_text = right_text if right_precedence > mine else f"({right_text})"
    return f"{left_text}{space}{op}{space}{right_text}", mine


class Refused(Exception):
    """The reference refuses what the evaluator must refuse, for this reason."""


def reference(tree: Tree, bound: int = 10**1000) -> Fraction:
    if isinstance(tree, int):
        return Fraction(tree)
    if tree[0] == "neg":
        return -reference(tree[1], bound)
    op, left, right = tree
    a, b = reference(left, bound), reference(right, bound)
    try:
        value = {
            "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
            "//": lambda: Fraction(a // b), "%": lambda: a % b, "^": lambda: a ** int(b),
        }[op]()  # fmt: skip
    except ZeroDivisionError:
        raise Refused("division by zero") from None
    if abs(value.numerator) >= bound:
        raise Refused("number too large")
    if value.denominator >= bound:
        raise Refused("number too precise")
    return value


def int_reference(tree: Tree) -> int:
    if isinstance(tree, int):
        return tree
    if tree[0] == "neg":
        return -int_reference(tree[1])
    op, left, right = tree
    a, b = int_reference(left), int_reference(right)
    return a + b if op == "+" else a - b if op == "-" else a * b


@given(tree=trees(["+", "-", "*"]), space=st.sampled_from(["", " "]))
def test_integer_expressions_match_python(tree: Tree, space: str) -> None:
    text, _ = render(tree, space)
    result = evaluate(text)
    assert result == int_reference(tree)
    assert type(result) is int


@given(tree=trees(["+", "-", "*", "/", "//", "%"], powers=True), space=st.sampled_from(["", " "]))
@settings(deadline=timedelta(seconds=1))
def test_rational_expressions_match_fractions(tree: Tree, space: str) -> None:
    text, _ = render(tree, space)
    try:
        expected = reference(tree)
    except Refused as refused:
        assert error_of(text).problem == str(refused)
    else:
        assert evaluate(text) == expected


SOUP = [
    "0", "7", "42", "1_0", ".5", "2.", "1e3", "1e-3", "9^9", "_", ".", "e", "E", "+", "-", "*", "**",
    "/", "//", "%", "^", "(", ")", ",", " ", "×", "÷", "−", "pi", "sqrt", "log", "ln", "round", "min",
    "exp", "sin", "abs", "x", "!", "=", "?", "'", "é", "²", "\n", "10^999", "0.1",
]  # fmt: skip


@given(text=st.lists(st.sampled_from(SOUP), max_size=400).map("".join) | st.text(max_size=1100))
@settings(max_examples=400, deadline=timedelta(seconds=1))
def test_garbage_is_refused_cleanly(text: str) -> None:
    try:
        result = evaluate(text)
    except ArithmeticInputError as error:
        assert 0 <= error.position <= len(text)
    else:
        assert isinstance(result, int | Fraction | float)
        assert not isinstance(result, float) or math.isfinite(result)
        assert format_number(result)
