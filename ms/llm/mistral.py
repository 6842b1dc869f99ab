"""Chat completions through the official `mistralai` client (Mistral's API, or a compatible server)."""

from ms.common.errors import one_line
from ms.llm.api import ChatAPILM, UnusableReply, reply_text


class MistralLM(ChatAPILM):
    provider = "mistral"

    def _connect(self, api_key: str) -> None:
        from mistralai.client import Mistral

        self.client = Mistral(api_key=api_key, server_url=self.base_url, timeout_ms=int(self.timeout_s * 1000))

    def _complete(self, messages, max_new_tokens, temperature, stop):
        from mistralai.client import errors

        try:
            response = self.client.chat.complete(**self._request(messages, max_new_tokens, temperature, stop))
        except errors.MistralError as error:
            # The client raises on a 2xx reply it cannot read (not JSON, or not a chat completion).
            if not 200 <= error.status_code < 300:
                raise
            kind = error.headers.get("content-type") or "no Content-Type"
            if "json" not in kind:
                raise UnusableReply(f"the reply is not JSON ({kind}): {one_line(error.body, 80)!r}") from error
            raise UnusableReply(f"the reply is not a chat completion: {one_line(error.message, 200)}") from error
        return reply_text(response)

    def _is_transient(self, error: Exception) -> bool:
        import httpx2  # the HTTP library mistralai 3.x is built on
        from mistralai.client import errors

        if isinstance(error, errors.MistralError):
            return error.status_code == 429 or error.status_code >= 500
        return isinstance(error, (httpx2.TimeoutException, httpx2.TransportError, errors.NoResponseError))
