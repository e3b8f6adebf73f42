"""The API's JSON bodies go through the same bounds as the pages' JSON (experiments.tuning.bounds):
a body nested 100,000 deep or holding a 5,000-digit number is a 400, not a RecursionError."""

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from experiments.tuning.bounds import InputError, load_json


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return load_json(stream.read().decode("utf-8"), what="The request body")
        except UnicodeDecodeError:
            raise ParseError("The request body is not UTF-8.") from None
        except InputError as exc:
            raise ParseError(str(exc)) from None
