"""The embedded mode's broker: kombu's filesystem transport with messages written aside and renamed into place,
so a consumer never reads one half written (kombu issue #1551)."""

import os
import uuid
from time import monotonic

from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

TEMPORARY_SUFFIX = ".tmp"


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        temporary = final + TEMPORARY_SUFFIX
        try:
            with open(temporary, "wb", buffering=0) as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(temporary, final)
        except OSError as exc:
            try:
                os.remove(temporary)
            except OSError:
                pass
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
