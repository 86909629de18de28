"""WMO weather interpretation codes, exactly the set Open-Meteo documents, in Chinese.

Open-Meteo's code list (``wmo-codes-json.svx``) also carries 97 (heavy thunderstorm); any
other code is reported as unknown rather than guessed from its neighbours.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["UNKNOWN_WEATHER", "WMO_WEATHER_ZH", "weather_description"]

UNKNOWN_WEATHER = "未知天气"

WMO_WEATHER_ZH: MappingProxyType[int, str] = MappingProxyType(
    {
        0: "晴",
        1: "大致晴朗",
        2: "多云",
        3: "阴",
        45: "雾",
        48: "雾凇",
        51: "小毛毛雨",
        53: "中毛毛雨",
        55: "大毛毛雨",
        56: "小冻毛毛雨",
        57: "大冻毛毛雨",
        61: "小雨",
        63: "中雨",
        65: "大雨",
        66: "小冻雨",
        67: "大冻雨",
        71: "小雪",
        73: "中雪",
        75: "大雪",
        77: "米雪",
        80: "小阵雨",
        81: "中阵雨",
        82: "强阵雨",
        85: "小阵雪",
        86: "大阵雪",
        95: "雷暴",
        96: "雷暴伴小冰雹",
        97: "强雷暴",
        99: "雷暴伴大冰雹",
    }
)


def weather_description(code: int) -> str:
    """The Chinese description of a WMO code; ``未知天气`` for a code outside the table."""
    return WMO_WEATHER_ZH.get(code, UNKNOWN_WEATHER)
