"""The chat for people: conversations with the mesh's agents in a browser.

- :mod:`gateways.chat.store`: the conversations, in the gateway's own SQLite file;
- ``static/``: the page and the sign-in page (HTML, CSS, JS modules; no build step, no CDN).

The web routes live with the web framework: :mod:`gateways.http.chat` (``/chat``) and
:mod:`gateways.http.signin` (``/signin``, browser sessions).
"""
