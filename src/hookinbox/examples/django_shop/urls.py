from django.urls import include, path

from hookinbox.examples.django_shop.orders.views import order_list

urlpatterns = [
    path("webhooks/", include("hookinbox.django.urls")),  # hookinbox: POST /webhooks/<source>
    path("orders/", order_list),
]
