"""Chat completions through the official `mistralai` client (Mistral's API, or a compatible server)."""

from __future__ import annotations

from ms.llm.api import ChatAPILM


class MistralLM(ChatAPILM):
    provider = "mistral"

    def _connect(self, api_key: str) -> None:
        from mistralai.client import Mistral

        self.client = Mistral(api_key=api_key, server_url=self.base_url, timeout_ms=int(self.timeout_s * 1000))

    def _complete(self, messages, max_new_tokens, temperature, stop):
        response = self.client.chat.complete(
            model=self.model, messages=messages, max_tokens=max_new_tokens, temperature=temperature,
            stop=stop or None)
        usage = response.usage
        return (response.choices[0].message.content or "",
                usage.prompt_tokens or 0 if usage else 0, usage.completion_tokens or 0 if usage else 0)

    def _is_transient(self, error: Exception) -> bool:
        import httpx2  # the HTTP library mistralai 3.x is built on
        from mistralai.client import errors

        if isinstance(error, errors.MistralError):
            return error.status_code == 429 or error.status_code >= 500
        return isinstance(error, (httpx2.TimeoutException, httpx2.TransportError, errors.NoResponseError))
